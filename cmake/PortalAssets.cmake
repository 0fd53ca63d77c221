# The web portal (web/): built with npm (npm ci, then Vite) when node and npm are found, and embedded into
# the library tessera_web as byte arrays (src/server/portal_assets.h). Without node or npm, or with
# -DTESSERA_BUILD_WEB=OFF, tessera_web holds no assets and the server says how to build the portal.
option(TESSERA_BUILD_WEB "Build the web portal with npm and embed it" ON)
find_program(TESSERA_NODE node)
find_program(TESSERA_NPM npm)
set(_web ${CMAKE_SOURCE_DIR}/web)
set(_web_out ${CMAKE_BINARY_DIR}/web)
set(_assets_cc ${CMAKE_BINARY_DIR}/generated/server/portal_assets_data.cc)
set(_embed ${CMAKE_SOURCE_DIR}/cmake/EmbedPortalAssets.cmake)
file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/generated/server)

if(TESSERA_BUILD_WEB AND TESSERA_NODE AND TESSERA_NPM)
  file(GLOB_RECURSE _web_src CONFIGURE_DEPENDS ${_web}/src/*)
  # npm ci only when the lockfile changes; node_modules lives in web/ (ignored by git).
  add_custom_command(
    OUTPUT ${_web_out}/npm-ci.stamp
    COMMAND ${TESSERA_NPM} ci --no-audit --no-fund --loglevel=error
    COMMAND ${CMAKE_COMMAND} -E touch ${_web_out}/npm-ci.stamp
    DEPENDS ${_web}/package.json ${_web}/package-lock.json
    WORKING_DIRECTORY ${_web}
    COMMENT "Installing the portal's npm packages (npm ci)")
  add_custom_command(
    OUTPUT ${_web_out}/dist/index.html
    COMMAND ${TESSERA_NODE} node_modules/vite/bin/vite.js build --logLevel warn --outDir ${_web_out}/dist --emptyOutDir
    DEPENDS ${_web_out}/npm-ci.stamp ${_web_src} ${_web}/index.html ${_web}/vite.config.js
    WORKING_DIRECTORY ${_web}
    COMMENT "Building the web portal (vite build)")
  add_custom_command(
    OUTPUT ${_assets_cc}
    COMMAND ${CMAKE_COMMAND} -DDIST=${_web_out}/dist -DOUT=${_assets_cc} -P ${_embed}
    DEPENDS ${_web_out}/dist/index.html ${_embed}
    COMMENT "Embedding the web portal")
  set(TESSERA_PORTAL_BUILT 1)
else()
  message(STATUS "Web portal not built (needs node and npm; scripts/install-deps.sh installs them)")
  add_custom_command(
    OUTPUT ${_assets_cc}
    COMMAND ${CMAKE_COMMAND} -DDIST= -DOUT=${_assets_cc} -P ${_embed}
    DEPENDS ${_embed}
    COMMENT "Embedding an empty web portal")
  set(TESSERA_PORTAL_BUILT 0)
endif()

add_library(tessera_web STATIC ${_assets_cc})
target_include_directories(tessera_web PUBLIC ${CMAKE_SOURCE_DIR}/src)

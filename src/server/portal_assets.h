#pragma once
// The web portal's static files (web/, built by Vite), embedded into the binary at build time by
// cmake/EmbedPortalAssets.cmake (library tessera_web). The table is empty when the build had no node/npm.

#include <span>
#include <string_view>

namespace tessera {

struct PortalAsset {
  std::string_view path;          // URL path, e.g. "/index.html", "/assets/index-1a2b3c.js"
  std::string_view content_type;  // e.g. "text/javascript; charset=utf-8"
  std::string_view body;
};

// Every embedded file; empty when the portal was not built.
std::span<const PortalAsset> PortalAssets();

// The file at `path` (exact match), or nullptr.
const PortalAsset* FindPortalAsset(std::string_view path);

}  // namespace tessera

#pragma once
// Where the tests find the source tree (examples/, ../shared) and the built `tessera` binary. The paths are
// compiled into one generated file (CMakeLists.txt), not into every test's command line, so that a second
// clone of the same commit reuses the first clone's compilations (ccache).
#include <string>

namespace tessera::testing {

const std::string& SourceDir();      // the project root, absolute
// The shared folder with the public traces: $TESSERA_SHARED_DIR, else ../shared beside the checkout, or
// beside the local checkout this one was cloned from (CMakeLists.txt).
const std::string& SharedDir();
const std::string& TesseraBinary();  // the built `tessera`, absolute

}  // namespace tessera::testing

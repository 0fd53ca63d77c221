#pragma once
// Where the tests find the source tree (examples/, ../shared) and the built `tessera` binary. The paths are
// compiled into one generated file (CMakeLists.txt), not into every test's command line, so that a second
// clone of the same commit reuses the first clone's compilations (ccache).
#include <string>

namespace tessera::testing {

const std::string& SourceDir();      // the project root, absolute
const std::string& TesseraBinary();  // the built `tessera`, absolute

}  // namespace tessera::testing

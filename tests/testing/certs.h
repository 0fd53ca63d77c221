#pragma once
// Test certificates made with the openssl command (scripts/install-deps.sh installs it): a CA, a server
// certificate for 127.0.0.1 and a client certificate it signed, and a client certificate of another CA.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>

namespace tessera::testing {

struct TestCerts {
  std::string ca, server_cert, server_key, client_cert, client_key, rogue_cert, rogue_key;
};

// Writes them under `dir`; false when openssl failed.
inline bool MakeTestCerts(const std::filesystem::path& dir, TestCerts* out) {
  const std::string d = dir.string();
  std::ofstream(dir / "srv.ext") << "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n";
  std::ofstream(dir / "cli.ext") << "extendedKeyUsage=clientAuth\n";
  const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  std::string script = "cd '" + d + "' && ";
  for (const char* ca : {"ca", "rogue"})
    script += "openssl req -x509" + ec + " -keyout " + ca + ".key -out " + ca + ".crt -days 2 -subj /CN=t-" + ca + " && ";
  for (const auto& [name, ca, ext] : {std::tuple{"srv", "ca", "srv.ext"}, {"cli", "ca", "cli.ext"}, {"bad", "rogue", "cli.ext"}})
    script += std::string("openssl req -new") + ec + " -keyout " + name + ".key -out " + name + ".csr -subj /CN=t-" +
              name + " && openssl x509 -req -in " + name + ".csr -CA " + ca + ".crt -CAkey " + ca +
              ".key -CAcreateserial -days 2 -out " + name + ".crt -extfile " + ext + " && ";
  script += "true >/dev/null 2>&1";
  if (std::system(("(" + script + ") >/dev/null 2>&1").c_str()) != 0) return false;
  auto p = [&](const char* f) { return (dir / f).string(); };
  *out = {p("ca.crt"), p("srv.crt"), p("srv.key"), p("cli.crt"), p("cli.key"), p("bad.crt"), p("bad.key")};
  return true;
}

}  // namespace tessera::testing

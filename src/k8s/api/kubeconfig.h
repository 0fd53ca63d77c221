#pragma once
// Where the Kubernetes API server is and how to authenticate to it: a kubeconfig file (its current context:
// the cluster's server and CA, the user's bearer token or client certificate) or the in-cluster
// configuration (KUBERNETES_SERVICE_HOST/PORT, the service account's token and CA). A token given as a
// file is re-read on every request, so a rotated service-account token is picked up.

#include <string>
#include <string_view>

#include "base/status.h"

namespace tessera {

struct KubeConfig {
  std::string server;           // https://host:port (or http://)
  std::string ca_pem;           // PEM of the CA that signs the server's certificate (empty = system roots)
  bool insecure = false;        // insecure-skip-tls-verify
  std::string token;            // bearer token (when no token_file)
  std::string token_file;       // re-read on each request
  std::string client_cert_pem;  // client certificate and key (PEM), both or neither
  std::string client_key_pem;
  std::string ns = "default";  // the context's namespace
  // The bearer token now (re-reads token_file; empty = none).
  std::string Token() const;
};

// Parses kubeconfig YAML. `dir` resolves relative file paths (certificate-authority, client-certificate,
// client-key, tokenFile). `context` empty = current-context. Errors name the source and the field.
Result<KubeConfig> ParseKubeconfig(std::string_view text, std::string_view source, const std::string& dir,
                                   const std::string& context = "");
Result<KubeConfig> LoadKubeconfig(const std::string& path, const std::string& context = "");
// The in-cluster configuration; `sa_dir` holds token, ca.crt and namespace.
Result<KubeConfig> InClusterConfig(
    const std::string& sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

// Base64 (standard alphabet, padding optional, whitespace ignored) to bytes; an error for bad input.
Result<std::string> DecodeBase64(std::string_view text);

}  // namespace tessera

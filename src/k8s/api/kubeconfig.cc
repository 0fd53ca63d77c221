#include "k8s/api/kubeconfig.h"

#include <fmt/format.h>
#include <openssl/evp.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <optional>

#include "base/file.h"
#include "base/yaml_reader.h"

namespace tessera {
namespace {

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// The map under `list[i].key` whose `name` is `name` (kubeconfig's named lists), or nothing.
std::optional<YAML::Node> Named(const YAML::Node& top, const char* list, const char* key,
                                const std::string& name) {
  const YAML::Node l = top[list];
  if (!l || !l.IsSequence()) return std::nullopt;
  for (const YAML::Node& e : l)
    if (e.IsMap() && e["name"] && e["name"].IsScalar() && e["name"].Scalar() == name && e[key] &&
        e[key].IsMap())
      return e[key];
  return std::nullopt;
}

std::string Scalar(const YAML::Node& m, const char* key) {
  const YAML::Node v = m[key];
  return v && v.IsScalar() ? v.Scalar() : std::string();
}

std::string Resolve(const std::string& dir, const std::string& path) {
  if (path.empty() || path[0] == '/' || dir.empty()) return path;
  return dir + "/" + path;
}

// A PEM from `<key>-data` (base64) or the file `<key>`; empty when neither is given.
Result<std::string> Pem(const YAML::Node& m, const std::string& key, std::string_view where,
                        const std::string& dir) {
  if (std::string data = Scalar(m, (key + "-data").c_str()); !data.empty()) {
    auto pem = DecodeBase64(data);
    if (!pem.ok()) return Status::Error(fmt::format("{}.{}-data: {}", where, key, pem.error()));
    return pem;
  }
  if (std::string file = Scalar(m, key.c_str()); !file.empty()) {
    auto text = ReadFile(Resolve(dir, file));
    if (!text.ok()) return Status::Error(fmt::format("{}.{}: {}", where, key, text.error()));
    return text;
  }
  return std::string();
}

}  // namespace

std::string KubeConfig::Token() const {
  if (token_file.empty()) return token;
  auto t = ReadFile(token_file);
  return t.ok() ? Trim(*t) : token;
}

Result<std::string> DecodeBase64(std::string_view text) {
  std::string in;
  for (char c : text)
    if (c != '\n' && c != '\r' && c != ' ' && c != '\t') in += c;
  while (in.size() % 4 != 0) in += '=';
  std::string out(in.size() / 4 * 3, '\0');
  const int n =
      EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  if (n < 0) return Status::Error("not valid base64");
  size_t pad = 0;
  for (size_t i = in.size(); i > 0 && in[i - 1] == '='; --i) ++pad;
  out.resize(static_cast<size_t>(n) - std::min<size_t>(pad, 2));
  return out;
}

Result<KubeConfig> ParseKubeconfig(std::string_view text, std::string_view source, const std::string& dir,
                                   const std::string& context) {
  auto parsed = ParseYaml(text, source);
  if (!parsed.ok()) return parsed.status();
  const YAML::Node top = *parsed;
  if (!top.IsMap()) return Status::Error(fmt::format("{}: not a kubeconfig (expected a map)", source));
  const std::string ctx_name = context.empty() ? Scalar(top, "current-context") : context;
  if (ctx_name.empty()) return Status::Error(fmt::format("{}: current-context: not set", source));
  const auto ctx_node = Named(top, "contexts", "context", ctx_name);
  if (!ctx_node) return Status::Error(fmt::format("{}: contexts: no context named '{}'", source, ctx_name));
  const YAML::Node ctx = *ctx_node;
  KubeConfig k;
  if (std::string ns = Scalar(ctx, "namespace"); !ns.empty()) k.ns = ns;
  const std::string cluster_name = Scalar(ctx, "cluster");
  const auto cluster_node = Named(top, "clusters", "cluster", cluster_name);
  if (!cluster_node)
    return Status::Error(fmt::format("{}: clusters: no cluster named '{}'", source, cluster_name));
  const YAML::Node cluster = *cluster_node;
  const std::string where = fmt::format("{}: clusters[{}].cluster", source, cluster_name);
  k.server = Scalar(cluster, "server");
  if (k.server.rfind("https://", 0) != 0 && k.server.rfind("http://", 0) != 0)
    return Status::Error(fmt::format("{}.server: '{}' is not an http(s) URL", where, k.server));
  k.insecure = Scalar(cluster, "insecure-skip-tls-verify") == "true";
  auto ca = Pem(cluster, "certificate-authority", where, dir);
  if (!ca.ok()) return ca.status();
  k.ca_pem = *ca;
  const std::string user_name = Scalar(ctx, "user");
  const auto user_node = Named(top, "users", "user", user_name);
  if (!user_node) return Status::Error(fmt::format("{}: users: no user named '{}'", source, user_name));
  const YAML::Node user = *user_node;
  const std::string uwhere = fmt::format("{}: users[{}].user", source, user_name);
  k.token = Scalar(user, "token");
  if (std::string f = Scalar(user, "tokenFile"); !f.empty()) k.token_file = Resolve(dir, f);
  auto cert = Pem(user, "client-certificate", uwhere, dir);
  if (!cert.ok()) return cert.status();
  auto key = Pem(user, "client-key", uwhere, dir);
  if (!key.ok()) return key.status();
  k.client_cert_pem = *cert;
  k.client_key_pem = *key;
  if (k.client_cert_pem.empty() != k.client_key_pem.empty())
    return Status::Error(fmt::format("{}: client-certificate and client-key go together", uwhere));
  const bool plugin = user["exec"] || user["auth-provider"];
  if (plugin && k.token.empty() && k.token_file.empty() && k.client_cert_pem.empty())
    return Status::Error(fmt::format(
        "{}.{}: credential plugins are not supported; give the user a token, tokenFile or client-certificate "
        "and client-key (e.g. a service account's token), or run in the cluster without --kubeconfig",
        uwhere, user["exec"] ? "exec" : "auth-provider"));
  return k;
}

Result<KubeConfig> LoadKubeconfig(const std::string& path, const std::string& context) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  const size_t slash = path.rfind('/');
  return ParseKubeconfig(*text, path, slash == std::string::npos ? "." : path.substr(0, slash), context);
}

Result<KubeConfig> InClusterConfig(const std::string& sa_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || *host == '\0' || port == nullptr || *port == '\0')
    return Status::Error(
        "no --kubeconfig given and not in a cluster (KUBERNETES_SERVICE_HOST/PORT are not set)");
  KubeConfig k;
  const std::string h = host;
  k.server = fmt::format("https://{}:{}", h.find(':') != std::string::npos ? "[" + h + "]" : h, port);
  k.token_file = sa_dir + "/token";
  auto token = ReadFile(k.token_file);
  if (!token.ok()) return token.status();
  auto ca = ReadFile(sa_dir + "/ca.crt");
  if (!ca.ok()) return ca.status();
  k.ca_pem = *ca;
  if (auto ns = ReadFile(sa_dir + "/namespace"); ns.ok() && !Trim(*ns).empty()) k.ns = Trim(*ns);
  return k;
}

}  // namespace tessera

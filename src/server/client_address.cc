#include "server/client_address.h"

#include <arpa/inet.h>

#include <charconv>
#include <cstring>

#include <fmt/format.h>

namespace tessera {
namespace {

// An address in binary: 4 bytes (IPv4, also an IPv4-mapped IPv6 address) or 16.
struct IpBytes {
  bool v6 = false;
  std::array<uint8_t, 16> bytes{};
};

std::string_view TrimSpaces(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool ParseIp(std::string_view text, IpBytes* out) {
  text = TrimSpaces(text);
  if (text.size() > 2 && text.front() == '[' && text.back() == ']') text = text.substr(1, text.size() - 2);
  if (size_t zone = text.find('%'); zone != std::string_view::npos) text = text.substr(0, zone);
  if (text.empty() || text.size() >= INET6_ADDRSTRLEN) return false;
  char buf[INET6_ADDRSTRLEN] = {};
  std::memcpy(buf, text.data(), text.size());
  *out = IpBytes{};
  if (inet_pton(AF_INET, buf, out->bytes.data()) == 1) return true;
  if (inet_pton(AF_INET6, buf, out->bytes.data()) != 1) return false;
  static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(out->bytes.data(), kMapped, sizeof kMapped) == 0) {
    std::memmove(out->bytes.data(), out->bytes.data() + 12, 4);
    std::memset(out->bytes.data() + 4, 0, 12);
    return true;
  }
  out->v6 = true;
  return true;
}

std::string TextOf(const IpBytes& ip) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(ip.v6 ? AF_INET6 : AF_INET, ip.bytes.data(), buf, sizeof buf);
  return buf;
}

// Whether the first `prefix` bits of `a` and `b` agree.
bool SamePrefix(const std::array<uint8_t, 16>& a, const std::array<uint8_t, 16>& b, int prefix) {
  const int whole = prefix / 8, rest = prefix % 8;
  if (std::memcmp(a.data(), b.data(), static_cast<size_t>(whole)) != 0) return false;
  if (rest == 0) return true;
  const uint8_t mask = static_cast<uint8_t>(0xff << (8 - rest));
  return (a[whole] & mask) == (b[whole] & mask);
}

}  // namespace

std::string CanonicalAddress(std::string_view text) {
  IpBytes ip;
  return ParseIp(text, &ip) ? TextOf(ip) : std::string();
}

Result<TrustedProxies> TrustedProxies::Parse(const std::vector<std::string>& cidrs) {
  TrustedProxies out;
  for (const std::string& cidr : cidrs) {
    auto bad = [&cidr] {
      return Status::Error(fmt::format("--trusted-proxy '{}': not a CIDR (an IPv4 or IPv6 address, optionally "
                                       "/prefix length: 10.0.0.0/8, 2001:db8::/32, 192.0.2.7)",
                                       cidr));
    };
    const size_t slash = cidr.find('/');
    IpBytes ip;
    if (!ParseIp(std::string_view(cidr).substr(0, slash), &ip) || cidr.find('%') != std::string::npos) return bad();
    const int max_bits = ip.v6 ? 128 : 32;
    int prefix = max_bits;
    if (slash != std::string::npos) {
      const char* first = cidr.data() + slash + 1;
      const char* last = cidr.data() + cidr.size();
      auto [end, ec] = std::from_chars(first, last, prefix);
      if (first == last || ec != std::errc() || end != last || *first == '+' || prefix < 0 || prefix > max_bits)
        return bad();
    }
    out.nets_.push_back(Net{ip.v6, ip.bytes, prefix});
  }
  return out;
}

bool TrustedProxies::Contains(std::string_view address) const {
  IpBytes ip;
  if (nets_.empty() || !ParseIp(address, &ip)) return false;
  for (const Net& n : nets_)
    if (n.v6 == ip.v6 && SamePrefix(n.bytes, ip.bytes, n.prefix)) return true;
  return false;
}

std::string TrustedProxies::ClientOf(std::string_view peer, const std::vector<std::string>& forwarded_for) const {
  std::string client = CanonicalAddress(peer);
  if (client.empty()) client = std::string(peer);
  if (!Contains(peer)) return client;
  // The entries, rightmost first: each header's comma-separated list, the last header's last entry first.
  for (auto header = forwarded_for.rbegin(); header != forwarded_for.rend(); ++header) {
    std::string_view list = *header;
    while (true) {
      const size_t comma = list.rfind(',');
      const std::string_view entry = TrimSpaces(comma == std::string_view::npos ? list : list.substr(comma + 1));
      if (!entry.empty()) {
        const std::string address = CanonicalAddress(entry);
        if (address.empty()) return client;  // malformed: the last trusted hop is as far as we can see
        client = address;
        if (!Contains(address)) return client;
      }
      if (comma == std::string_view::npos) break;
      list = list.substr(0, comma);
    }
  }
  return client;
}

std::string TrustedProxies::ClientOf(const httplib::Request& req) const {
  if (nets_.empty()) return req.remote_addr;
  std::vector<std::string> forwarded;
  auto [first, last] = req.headers.equal_range("X-Forwarded-For");
  for (auto it = first; it != last; ++it) forwarded.push_back(it->second);
  return ClientOf(req.remote_addr, forwarded);
}

}  // namespace tessera

#pragma once
// The client address of a request: what the per-address limits count and the audit log records.
//
// Without trusted proxies it is the socket peer. With them (`tessera serve --trusted-proxy CIDR`,
// repeatable, IPv4 and IPv6), a request whose peer is inside a trusted CIDR comes from the rightmost
// X-Forwarded-For address that is not itself inside one: each proxy appends the address it saw, so that is
// the first hop no trusted proxy vouches for, and whatever a client wrote further left is never believed.
// Every address is trusted (or the header names none): the leftmost one. A malformed entry reached before
// an untrusted address ends the walk: the last trusted address read is the client. From a peer outside
// every trusted CIDR, X-Forwarded-For is ignored. Addresses are compared and returned in canonical form
// (inet_ntop; an IPv4-mapped IPv6 address as IPv4).

#include <httplib.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tessera {

// The canonical text of an IP address (an IPv6 zone "%eth0" and brackets are dropped), or "" when `text`
// is not one.
std::string CanonicalAddress(std::string_view text);

class TrustedProxies {
 public:
  TrustedProxies() = default;
  // Parses CIDRs: "10.0.0.0/8", "2001:db8::/32", or an address alone (/32 or /128). Host bits past the
  // prefix are ignored. The error names --trusted-proxy and the entry.
  static Result<TrustedProxies> Parse(const std::vector<std::string>& cidrs);

  bool empty() const { return nets_.empty(); }
  // Whether `address` (any form CanonicalAddress takes) is inside a trusted CIDR.
  bool Contains(std::string_view address) const;
  // The client of a request from `peer` carrying these X-Forwarded-For header values, in header order.
  std::string ClientOf(std::string_view peer, const std::vector<std::string>& forwarded_for) const;
  std::string ClientOf(const httplib::Request& req) const;

 private:
  struct Net {
    bool v6 = false;
    std::array<uint8_t, 16> bytes{};
    int prefix = 0;  // bits
  };
  std::vector<Net> nets_;
};

}  // namespace tessera

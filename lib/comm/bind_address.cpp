#include "comm/bind_address.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>
#include <optional>

#include "core/error.h"

namespace vescale::comm {
namespace {

/// This thread's override of the wildcard address (NOTE [Store bind address]).
thread_local std::optional<in_addr> t_bind_only;

in_addr ipv4_of(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  VS_CHECK(rc == 0 && found != nullptr, "[comm] cannot bind the rendezvous to {}: {}", host,
           rc == 0 ? "no IPv4 address" : ::gai_strerror(rc));
  const in_addr address = reinterpret_cast<const sockaddr_in*>(found->ai_addr)->sin_addr;
  ::freeaddrinfo(found);
  return address;
}

using BindFn = int (*)(int, const sockaddr*, socklen_t);

BindFn libc_bind() {
  static const BindFn real = [] {
    const auto found = reinterpret_cast<BindFn>(::dlsym(RTLD_NEXT, "bind"));
    if (found == nullptr) std::abort();  // no libc bind to pass on to: nothing could bind
    return found;
  }();
  return real;
}

}  // namespace

BindOnlyTo::BindOnlyTo(const std::string& host) {
  t_bind_only = ipv4_of(host);
}

BindOnlyTo::~BindOnlyTo() {
  t_bind_only.reset();
}

}  // namespace vescale::comm

// The interposer itself: a wildcard bind on a thread holding a BindOnlyTo binds its address.
extern "C" int bind(int fd, const sockaddr* addr, socklen_t len) {
  using vescale::comm::t_bind_only;
  const auto real = vescale::comm::libc_bind();
  if (!t_bind_only || addr == nullptr) return real(fd, addr, len);
  if (addr->sa_family == AF_INET && len >= sizeof(sockaddr_in)) {
    sockaddr_in v4;
    std::memcpy(&v4, addr, sizeof(v4));
    if (v4.sin_addr.s_addr != htonl(INADDR_ANY)) return real(fd, addr, len);
    v4.sin_addr = *t_bind_only;
    return real(fd, reinterpret_cast<const sockaddr*>(&v4), sizeof(v4));
  }
  if (addr->sa_family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
    sockaddr_in6 v6;
    std::memcpy(&v6, addr, sizeof(v6));
    if (std::memcmp(&v6.sin6_addr, &in6addr_any, sizeof(in6_addr)) != 0) return real(fd, addr, len);
    // ::ffff:a.b.c.d, the IPv4 address on a dual-stack socket.
    std::memset(&v6.sin6_addr, 0, sizeof(in6_addr));
    v6.sin6_addr.s6_addr[10] = 0xff;
    v6.sin6_addr.s6_addr[11] = 0xff;
    std::memcpy(&v6.sin6_addr.s6_addr[12], &*t_bind_only, 4);
    return real(fd, reinterpret_cast<const sockaddr*>(&v6), sizeof(v6));
  }
  return real(fd, addr, len);
}

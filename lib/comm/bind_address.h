// Binding the rendezvous server to the configured address only.
//
// NOTE [Store bind address]
// LibTorch 1.13's TCPStore server has no option for the address it listens on: it binds the
// wildcard address (every interface), so on a cluster anyone who can reach the node can talk to
// the job's store. This binary defines `bind` (it interposes on libc's for every library in the
// process) and, while a BindOnlyTo lives on the calling thread, turns a bind to the wildcard
// address (0.0.0.0 or ::) into a bind to the configured host's IPv4 address (as ::ffff:a.b.c.d on
// an IPv6 socket); every other bind passes through unchanged. Store::tcp holds one while rank 0
// creates the server, so it listens on MASTER_ADDR only. (LibTorch 2.x takes a listening socket
// instead, TCPStoreOptions::masterListenFd; not compiled here.)
#pragma once

#include <string>

namespace vescale::comm {

/// While it lives, wildcard binds on this thread bind `host` (a name or an IPv4 address) instead.
/// Throws Error if `host` has no IPv4 address.
class BindOnlyTo {
 public:
  explicit BindOnlyTo(const std::string& host);
  ~BindOnlyTo();
  BindOnlyTo(const BindOnlyTo&) = delete;
  BindOnlyTo& operator=(const BindOnlyTo&) = delete;
};

}  // namespace vescale::comm

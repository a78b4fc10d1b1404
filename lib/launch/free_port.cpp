#include "launch/free_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace vescale {

int find_free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  VS_CHECK(fd >= 0, "[launch] socket() failed: {}", std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  const int err = errno;
  ::close(fd);
  VS_CHECK(ok, "[launch] could not find a free port: {}", std::strerror(err));
  return ntohs(addr.sin_port);
}

}  // namespace vescale

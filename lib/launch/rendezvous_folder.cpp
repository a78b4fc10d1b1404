#include "launch/rendezvous_folder.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "core/error.h"

namespace vescale::detail {

RendezvousFolder::RendezvousFolder() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp != nullptr && *tmp ? tmp : "/tmp") + "/vescale-rdzv-XXXXXX";
  VS_CHECK(::mkdtemp(pattern.data()) != nullptr,
           "[launch] cannot create a rendezvous folder {}: {}", pattern, std::strerror(errno));
  folder_ = pattern;
}

RendezvousFolder::~RendezvousFolder() {
  std::error_code ignored;
  std::filesystem::remove_all(folder_, ignored);
}

}  // namespace vescale::detail

// Where the local launcher's workers meet. Internal to launch/.
#pragma once

#include <string>

namespace vescale::detail {

// NOTE [Local rendezvous]
// The local launcher's workers meet in a c10d FileStore in a fresh folder of mode 0700 per
// attempt (mkdtemp), removed when the attempt ends: LibTorch 1.13's TCPStore server listens on
// every interface, and workers on one machine need no port at all; nobody else can read or plant
// the file. Gloo's connections bind 127.0.0.1.
class RendezvousFolder {
 public:
  /// Creates $TMPDIR/vescale-rdzv-XXXXXX (/tmp without TMPDIR), mode 0700.
  RendezvousFolder();
  /// Removes the folder and what the workers left in it.
  ~RendezvousFolder();
  RendezvousFolder(const RendezvousFolder&) = delete;
  RendezvousFolder& operator=(const RendezvousFolder&) = delete;

  std::string store_file() const { return folder_ + "/store"; }

 private:
  std::string folder_;
};

}  // namespace vescale::detail

#include "hf/lora_base.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>

#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/crc32c.h"
#include "core/error.h"
#include "hf/import.h"

namespace vescale {
namespace {

namespace fs = std::filesystem;

/// The files that hold the weights of `source`, in name order.
std::vector<fs::path> base_files(const std::string& source) {
  const bool hf = hf::is_hf_path(source);
  const fs::path path = fs::path(hf ? hf::hf_folder(source) : source);
  std::vector<fs::path> files;
  if (fs::is_regular_file(path)) {
    files.push_back(path);
  } else if (fs::is_directory(path)) {
    for (const auto& entry : fs::directory_iterator(path)) {
      const fs::path& p = entry.path();
      const std::string ext = p.extension().string();
      const bool weights =
          hf ? (ext == ".safetensors" || p.filename() == "config.json") : ext == ".h5";
      if (entry.is_regular_file() && weights) files.push_back(p);
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string checksum_of(const std::vector<fs::path>& files) {
  uint32_t crc = 0;
  std::vector<char> buffer(size_t{1} << 22);
  for (const fs::path& file : files) {
    const std::string name = file.filename().string();
    crc = crc32c(name.data(), name.size(), crc);
    std::ifstream in(file, std::ios::binary);
    VS_USER_CHECK(in.good(), "[lora] cannot read {}", file.string());
    while (in) {
      in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
      crc = crc32c(buffer.data(), static_cast<size_t>(in.gcount()), crc);
    }
  }
  return fmt::format("{:08x}", crc);
}

}  // namespace

LoraBase lora_base_of(const std::string& source) {
  const bool hf = hf::is_hf_path(source);
  // A checkpoint's "latest" (or a checkpoints folder) moves on: the step folder it names now.
  const std::string path = hf ? hf::hf_folder(source) : CheckpointReader(source).path();
  const std::string absolute = fs::weakly_canonical(fs::absolute(path)).string();
  const std::string named = hf ? "hf:" + absolute : absolute;
  const std::vector<fs::path> files = base_files(named);
  VS_USER_CHECK(!files.empty(),
                "[lora] the base {} holds no weights ({}): set checkpoint.load to a checkpoint "
                "step folder, a merged .h5, or \"hf:DIR\"",
                source, hf ? "no config.json or .safetensors" : "no .h5 file");
  return {named, checksum_of(files)};
}

void check_lora_base(const LoraBase& recorded, const std::string& checkpoint) {
  const std::vector<fs::path> files = base_files(recorded.source);
  VS_USER_CHECK(!files.empty(),
                "[lora] {} adapts the base {}, which is gone: put its weights back there (the "
                "adapters are trained on them)",
                checkpoint, recorded.source);
  const std::string now = checksum_of(files);
  VS_USER_CHECK(now == recorded.checksum,
                "[lora] {} adapts the base {}, whose files have changed since (CRC-32C {} now, {} "
                "when the run started): the adapters were trained on the old weights; put them "
                "back",
                checkpoint, recorded.source, now, recorded.checksum);
}

}  // namespace vescale

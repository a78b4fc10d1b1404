// safetensors files: what the writer writes reads back exactly (dtypes, shapes, an empty tensor,
// metadata, 8-byte aligned data), and damaged or hostile files are errors naming the file and
// the tensor, never a crash or a wrong value.
#include "hf/safetensors.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "support/training_runs.h"

namespace vescale::hf {
namespace {

std::string folder() {
  static const std::string f = [] {
    const std::string f = testing::fresh_folder("vescale-safetensors");
    std::filesystem::create_directories(f);
    return f;
  }();
  return f;
}

/// A file of `header` (its length prefixed) followed by `data`.
std::string raw_file(const std::string& name, const std::string& header, const std::string& data,
                     int64_t claimed_length = -1) {
  const std::string path = folder() + "/" + name;
  std::ofstream out(path, std::ios::binary);
  const uint64_t length =
      claimed_length < 0 ? header.size() : static_cast<uint64_t>(claimed_length);
  out.write(reinterpret_cast<const char*>(&length), 8);
  out << header << data;
  return path;
}

/// A FIFO by a safetensors file's name: opening it must not wait for a writer.
std::string fifo_file() {
  const std::string path = folder() + "/fifo.safetensors";
  std::filesystem::remove(path);
  EXPECT_EQ(::mkfifo(path.c_str(), 0600), 0);
  return path;
}

/// A folder by that name.
std::string folder_file() {
  const std::string path = folder() + "/folder.safetensors";
  std::filesystem::create_directories(path);
  return path;
}

std::string tiny_file() {
  const std::string path = folder() + "/tiny";
  std::ofstream(path, std::ios::binary) << "abc";
  return path;
}

std::string error_of(const std::string& path) {
  try {
    SafetensorsFile file(path);
    for (const auto& name : file.names())
      file.read(name);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(Safetensors, WrittenTensorsReadBackExactly) {
  const at::Tensor a = at::randn({3, 5}, at::kDouble);
  const at::Tensor b = at::randn({7}).to(at::kBFloat16);
  const at::Tensor c = at::arange(6, at::kLong).reshape({2, 3});
  const at::Tensor empty = at::empty({0, 4});
  const std::string path = folder() + "/ok.safetensors";
  SafetensorsWriter w(path,
                      {{"a", at::kDouble, {3, 5}},
                       {"b", at::kBFloat16, {7}},
                       {"c", at::kLong, {2, 3}},
                       {"empty", at::kFloat, {0, 4}}},
                      {{"format", "pt"}});
  w.write("a", a);
  w.write("b", b);
  w.write("c", c.t().contiguous().t());  // values, not layout, are written
  w.write("empty", empty);
  w.finish();
  EXPECT_EQ(w.bytes(), static_cast<int64_t>(std::filesystem::file_size(path)));
  SafetensorsFile f(path);
  EXPECT_EQ(f.names(), (std::vector<std::string>{"a", "b", "c", "empty"}));
  EXPECT_TRUE(at::equal(f.read("a"), a));
  EXPECT_TRUE(at::equal(f.read("b"), b));
  EXPECT_TRUE(at::equal(f.read("c"), c));
  EXPECT_EQ(f.read("empty").sizes().vec(), (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(f.metadata().at("format"), "pt");
  uint64_t length = 0;
  std::ifstream(path, std::ios::binary).read(reinterpret_cast<char*>(&length), 8);
  EXPECT_EQ(length % 8, 0u);  // the data starts aligned
}

TEST(Safetensors, AnUnfinishedWriterLeavesNoFile) {
  const std::string path = folder() + "/unfinished.safetensors";
  {
    SafetensorsWriter w(path, {{"a", at::kFloat, {2}}});
    w.write("a", at::ones({2}));
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(Safetensors, DamagedFilesAreErrorsNamingFileAndTensor) {
  const std::string good = R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";
  const std::string data(16, '\0');
  struct Case {
    std::string path, message;
  };
  const std::vector<Case> cases{
      {raw_file("cut", good, data.substr(0, 10)), "lie outside the file's 10 data bytes"},
      {raw_file("long-header", good, data, 1 << 20), "the header claims 1048576 bytes"},
      {raw_file("not-json", "{\"w\": [", data), "the header is not JSON"},
      {raw_file("dtype", R"({"w":{"dtype":"F7","shape":[2,2],"data_offsets":[0,16]}})", data),
       "tensor w: unknown dtype 'F7'"},
      {raw_file("shape", R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,16]}})", data),
       "tensor w: 16 bytes for a F32 tensor of shape [2, 3] (24 bytes)"},
      {raw_file("negative", R"({"w":{"dtype":"F32","shape":[-2,2],"data_offsets":[0,16]}})", data),
       "tensor w: a shape dim is not an integer"},
      {raw_file("offsets", R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[8,24]}})", data),
       "tensor w: bytes [8, 24) lie outside"},
      {raw_file("overlap",
                R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                R"("v":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                data),
       "overlap"},
      {raw_file("empty-header", "", ""), "the header is not JSON"},
      {tiny_file(), "3 bytes, too short for a safetensors file"},
      {raw_file("shape-not-list", R"({"w":{"dtype":"F32","shape":4,"data_offsets":[0,16]}})", data),
       "tensor w: shape is not a list of dims"},
      // 2^80 elements wrapped an int64 to 0: "(0 bytes)" on aef2252.
      {raw_file(
           "huge",
           R"({"w":{"dtype":"F32","shape":[1099511627776,1099511627776],"data_offsets":[0,0]}})",
           data),
       "tensor w: shape [1099511627776,1099511627776] has more than 2^40 elements"},
      {fifo_file(), "is not a regular file"},
      {folder_file(), "is not a regular file"},
  };
  for (const Case& c : cases) {
    const std::string error = error_of(c.path);
    std::printf("%-12s %s\n", std::filesystem::path(c.path).filename().c_str(), error.c_str());
    EXPECT_NE(error.find(c.path), std::string::npos) << error;
    EXPECT_NE(error.find(c.message), std::string::npos) << error;
  }
}

}  // namespace
}  // namespace vescale::hf

#include "train/tensorboard.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>

#include "checkpoint/crc32c.h"
#include "core/write_fully.h"

namespace vescale {
namespace {

uint32_t masked_crc(const std::string& bytes) {
  const uint32_t crc = crc32c(bytes.data(), bytes.size());
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

template <typename T>
void put_le(std::string& out, T value) {
  for (size_t i = 0; i < sizeof(T); ++i)
    out.push_back(static_cast<char>((static_cast<uint64_t>(value) >> (8 * i)) & 0xff));
}

void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

/// A length-delimited field (wire type 2).
void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_varint(out, static_cast<uint64_t>(field) << 3 | 2);
  put_varint(out, bytes.size());
  out += bytes;
}

void put_double(std::string& out, int field, double value) {
  put_varint(out, static_cast<uint64_t>(field) << 3 | 1);
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  put_le(out, bits);
}

void put_float(std::string& out, int field, float value) {
  put_varint(out, static_cast<uint64_t>(field) << 3 | 5);
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  put_le(out, bits);
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string version_event(double wall_time) {
  std::string event;
  put_double(event, 1, wall_time);
  put_bytes(event, 3, "brain.Event:2");
  return event;
}

}  // namespace

std::string tfrecord(const std::string& data) {
  std::string length;
  put_le(length, static_cast<uint64_t>(data.size()));
  std::string out = length;
  put_le(out, masked_crc(length));
  out += data;
  put_le(out, masked_crc(data));
  return out;
}

std::string scalar_event(double wall_time, int64_t step,
                         const std::vector<std::pair<std::string, double>>& scalars) {
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    std::string v;
    put_bytes(v, 1, tag);
    put_float(v, 2, static_cast<float>(value));
    put_bytes(summary, 1, v);
  }
  std::string event;
  put_double(event, 1, wall_time);
  put_varint(event, 2 << 3);  // step: varint
  put_varint(event, static_cast<uint64_t>(step));
  put_bytes(event, 5, summary);
  return event;
}

std::vector<std::pair<std::string, double>> metrics_scalars(const StepMetrics& m) {
  std::vector<std::pair<std::string, double>> out{{"loss", m.loss}};
  if (m.val_loss) out.emplace_back("val_loss", *m.val_loss);
  out.insert(out.end(), {{"lr", m.lr},
                         {"grad_norm", m.grad_norm},
                         {"tokens_per_s", m.tokens_per_s},
                         {"mfu", m.mfu},
                         {"step_time_s", m.step_time_s},
                         {"mem_bytes", static_cast<double>(m.mem_bytes)}});
  if (m.gpu_mem) {
    out.emplace_back("gpu_mem/allocated_peak", static_cast<double>(m.gpu_mem->allocated_peak));
    out.emplace_back("gpu_mem/reserved_peak", static_cast<double>(m.gpu_mem->reserved_peak));
  }
  for (const auto& [kind, bytes] : m.state_bytes)
    out.emplace_back("state_bytes/" + kind, static_cast<double>(bytes));
  for (const auto& [dim, bytes] : m.comm_bytes)
    out.emplace_back("comm_bytes/" + dim, static_cast<double>(bytes));
  for (const auto& [phase, seconds] : step_phases(m))
    out.emplace_back("time_s/" + phase, seconds);
  for (const auto& [dim, seconds] : m.comm_wait_s)
    out.emplace_back("comm_wait_s/" + dim, seconds);
  out.emplace_back("checkpoint_stall_s", m.checkpoint_stall_s);
  return out;
}

TensorBoardWriter::TensorBoardWriter(std::string folder) : folder_(std::move(folder)) {}

TensorBoardWriter::~TensorBoardWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void TensorBoardWriter::write(const StepMetrics& m) {
  if (folder_.empty() || failed_) return;
  const double wall_time = now_seconds();
  bool ok = true;
  if (fd_ < 0) {
    char host[256] = "host";
    ::gethostname(host, sizeof host - 1);
    std::filesystem::create_directories(folder_);
    path_ = (std::filesystem::path(folder_) / fmt::format("events.out.tfevents.{}.{}.{}",
                                                          static_cast<int64_t>(wall_time), host,
                                                          ::getpid()))
                .string();
    fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                 0644);
    ok = fd_ >= 0 && write_fully(fd_, tfrecord(version_event(wall_time)));
  }
  ok = ok && write_fully(fd_, tfrecord(scalar_event(wall_time, m.step, metrics_scalars(m))));
  if (!ok) {
    failed_ = true;
    spdlog::error(
        "metrics: writing the TensorBoard events {} failed ({}); no more events are "
        "recorded for this run",
        path_, std::strerror(errno));
  }
}

}  // namespace vescale

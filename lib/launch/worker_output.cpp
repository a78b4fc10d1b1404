#include "launch/worker_output.h"

#include <poll.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <utility>
#include <vector>

#include "core/write_fully.h"
#include "launch/liveness.h"
#include "launch/supervisor.h"
#include "launch/worker_process.h"

namespace vescale::detail {
namespace {

/// Reads what is available on `fd` and hands each complete line to `on_line`; at end of file
/// (or an error) also the unfinished last one when `flush_unfinished`, then closes `fd` (-1).
/// Returns false at end of file.
template <typename OnLine>
bool read_lines(int& fd, std::string& partial, bool flush_unfinished, OnLine&& on_line) {
  char buffer[65536];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n > 0) {
      partial.append(buffer, static_cast<size_t>(n));
    } else if (flush_unfinished && !partial.empty()) {
      partial.push_back('\n');
    }
    size_t start = 0, end;
    while ((end = partial.find('\n', start)) != std::string::npos) {
      on_line(partial.substr(start, end - start));
      start = end + 1;
    }
    partial.erase(0, start);
    if (n <= 0) {
      ::close(fd);
      fd = -1;
      return false;
    }
  }
}

/// Reads the heartbeat lines available from a worker into `monitor` (NOTE [Heartbeat]).
void read_beats(Worker& w, LivenessMonitor& monitor) {
  const auto now = LivenessMonitor::Clock::now();
  read_lines(w.beat_fd, w.beat_partial, false,
             [&](const std::string& line) { monitor.on_line(w.rank, line, now); });
}

/// Forwards the complete lines available on `fd` (prefixed "[rank N] " when `prefix`), and what
/// is left at end of file; returns false at end of file.
bool pump(Worker& w, int& fd, std::string& partial, int to_fd, bool prefix) {
  std::string out;
  const bool open = read_lines(fd, partial, true, [&](const std::string& line) {
    if (!line.empty()) w.last_line = line;
    out += prefix ? fmt::format("[rank {}] {}\n", w.rank, line) : line + "\n";
    if (out.size() >= 65536) {  // a flood is passed on as it comes, not held
      write_all(to_fd, out);
      out.clear();
    }
  });
  write_all(to_fd, out);
  return open;
}

/// The open output pipes of the workers, to poll.
enum class PipeKind { kStdout, kStderr, kHeartbeat };

struct Pipes {
  std::vector<pollfd> fds;
  std::vector<std::pair<size_t, PipeKind>> owners;  // worker index, which pipe
};

Pipes open_pipes(const std::vector<Worker>& workers) {
  Pipes pipes;
  for (size_t i = 0; i < workers.size(); ++i) {
    for (auto [fd, kind] : {std::pair{workers[i].out_fd, PipeKind::kStdout},
                            std::pair{workers[i].err_fd, PipeKind::kStderr},
                            std::pair{workers[i].beat_fd, PipeKind::kHeartbeat}}) {
      if (fd < 0) continue;
      pipes.fds.push_back({fd, POLLIN, 0});
      pipes.owners.push_back({i, kind});
    }
  }
  return pipes;
}

}  // namespace

void write_all(int fd, const std::string& text) {
  (void)write_fully(fd, text);
}

bool forward_output(Supervision& s, const LocalLaunchOptions& options) {
  Pipes pipes = open_pipes(s.workers);
  if (pipes.fds.empty() && s.alive == 0) return false;
  if (!pipes.fds.empty()) {
    ::poll(pipes.fds.data(), pipes.fds.size(), 100);
  } else {
    ::usleep(100 * 1000);
  }
  for (size_t k = 0; k < pipes.fds.size(); ++k) {
    if (pipes.fds[k].revents == 0) continue;
    Worker& w = s.workers[pipes.owners[k].first];
    if (pipes.owners[k].second == PipeKind::kHeartbeat) {
      read_beats(w, *s.liveness);
    } else if (pipes.owners[k].second == PipeKind::kStderr) {
      pump(w, w.err_fd, w.err_partial, STDERR_FILENO, options.prefix_output);
    } else {
      // Rank 0's stdout is the command's result (a table, a report): forwarded as it is.
      pump(w, w.out_fd, w.out_partial, STDOUT_FILENO, options.prefix_output && w.rank != 0);
    }
  }
  return true;
}

}  // namespace vescale::detail

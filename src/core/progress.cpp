// costate::Progress (core/progress.hpp): the scopes alive form a stack; any
// update redraws the one line from all of them.
#include "costate/core/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iomanip>
#include <sstream>
#include <vector>

namespace costate {

namespace {

bool g_enabled = false;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Seconds before the first draw: short computations stay silent.
double first_draw_delay() {
  constexpr double kDefaultDelay = 0.5;
  if (const char* s = std::getenv("COSTATE_PROGRESS_DELAY")) {
    char* end = nullptr;
    const double v = std::strtod(s, &end);
    if (end != s && v >= 0.0) return v;
  }
  return kDefaultDelay;
}

std::string seconds_text(double s) {
  std::ostringstream os;
  os.precision(s < 10.0 ? 2 : 3);
  if (s < 60.0)
    os << s << " s";
  else if (s < 3600.0)
    os << static_cast<int>(s / 60.0) << " min " << static_cast<int>(s) % 60 << " s";
  else
    os << static_cast<int>(s / 3600.0) << " h " << static_cast<int>(s / 60.0) % 60 << " min";
  return os.str();
}

/// A count as an integer when it is one, else to 4 digits (time units).
std::string count_text(double v) {
  std::ostringstream os;
  if (v == static_cast<double>(static_cast<long long>(v)))
    os << static_cast<long long>(v);
  else
    os << std::setprecision(4) << v;
  return os.str();
}

}  // namespace

struct ProgressLine {
  std::vector<Progress*> stack;
  double first_start = 0.0, last_draw = 0.0;
  std::size_t width = 0;  ///< of the last line drawn, to clear it
  bool drawn = false;

  static ProgressLine& get() {
    static ProgressLine line;
    return line;
  }

  void draw(bool force) {
    const double now = now_seconds();
    if (now - first_start < first_draw_delay() || (!force && now - last_draw < 0.1)) return;
    last_draw = now;
    std::ostringstream os;
    for (std::size_t k = 0; k < stack.size(); ++k) {
      const Progress& p = *stack[k];
      const double f = p.total_ > 0.0 ? std::clamp(p.done_ / p.total_, 0.0, 1.0) : -1.0;
      if (k == 0 && f >= 0.0) {
        constexpr int kBar = 30;
        const int filled = static_cast<int>(f * kBar);
        os << "[" << std::string(static_cast<std::size_t>(filled), '#')
           << std::string(static_cast<std::size_t>(kBar - filled), '.') << "] ";
      }
      if (k > 0) os << " | ";
      os << p.what_ << " " << count_text(p.done_);
      if (p.total_ > 0.0) os << "/" << count_text(p.total_);
      if (!p.note_.empty()) os << " (" << p.note_ << ")";
      const double elapsed = now - p.start_;
      os << " " << seconds_text(elapsed);
      if (f > 0.0 && f < 1.0) os << ", ~" << seconds_text(elapsed * (1.0 - f) / f) << " left";
      else if (f == 0.0) os << ", ? left";
    }
    const std::string text = os.str();
    const std::size_t pad = width > text.size() ? width - text.size() : 0;
    std::fprintf(stderr, "\r%s%*s", text.c_str(), static_cast<int>(pad), "");
    std::fflush(stderr);
    width = text.size();
    drawn = true;
  }

  void clear() {
    if (drawn) {
      std::fprintf(stderr, "\r%*s\r", static_cast<int>(width), "");
      std::fflush(stderr);
    }
    drawn = false;
    width = 0;
  }
};

void set_progress_enabled(bool enabled) { g_enabled = enabled; }
void clear_progress_line() {
  ProgressLine& line = ProgressLine::get();
  line.clear();
  line.last_draw = 0.0;
}
bool progress_enabled() { return g_enabled; }

Progress::Progress(std::string what, double total, bool enabled)
    : what_(std::move(what)), total_(total), start_(now_seconds()), active_(enabled && g_enabled) {
  if (!active_) return;
  ProgressLine& line = ProgressLine::get();
  if (line.stack.empty()) {
    line.first_start = start_;
    line.last_draw = 0.0;
  }
  line.stack.push_back(this);
}

Progress::~Progress() { finish(); }

void Progress::update(double done, const std::string& note) {
  if (!active_) return;
  done_ = done;
  note_ = note;
  // A scope's first update is drawn at once (past the delay): a new phase shows.
  ProgressLine::get().draw(!updated_);
  updated_ = true;
}

void Progress::finish() {
  if (!active_) return;
  active_ = false;
  ProgressLine& line = ProgressLine::get();
  line.stack.erase(std::remove(line.stack.begin(), line.stack.end(), this), line.stack.end());
  if (line.stack.empty()) line.clear();
}

}  // namespace costate

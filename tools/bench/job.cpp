#include "job.hpp"

#include <cctype>
#include <charconv>
#include <cmath>

namespace dcache::bench {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::optional<bool> parse_bool(std::string_view v) {
  const auto l = lower(v);
  if (l == "1" || l == "true" || l == "yes" || l == "on") return true;
  if (l == "0" || l == "false" || l == "no" || l == "off") return false;
  return std::nullopt;
}

std::optional<std::uint64_t> parse_uint(std::string_view v) {
  std::uint64_t out = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc{} || p != v.data() + v.size() || v.empty()) return std::nullopt;
  return out;
}

parse_error bad(std::string_view key, std::string_view value, std::string_view allowed) {
  return {"'" + std::string(key) + "' = '" + std::string(value) + "' is not valid; expected " +
          std::string(allowed)};
}

}  // namespace

std::string_view to_string(rw_mode m) {
  switch (m) {
    case rw_mode::read:
      return "read";
    case rw_mode::write:
      return "write";
    case rw_mode::rw:
      return "rw";
    case rw_mode::randread:
      return "randread";
    case rw_mode::randwrite:
      return "randwrite";
    case rw_mode::randrw:
      return "randrw";
    case rw_mode::interleave:
      return "interleave";
    case rw_mode::probe:
      return "probe";
  }
  return "?";
}

bool is_random(rw_mode m) {
  return m == rw_mode::randread || m == rw_mode::randwrite || m == rw_mode::randrw || m == rw_mode::probe;
}

bool reads_at_all(rw_mode m, unsigned rwmixread) {
  switch (m) {
    case rw_mode::read:
    case rw_mode::randread:
    case rw_mode::probe:
      return true;
    case rw_mode::rw:
    case rw_mode::randrw:
      return rwmixread > 0;
    default:
      return false;
  }
}

bool writes_at_all(rw_mode m, unsigned rwmixread) {
  switch (m) {
    case rw_mode::write:
    case rw_mode::randwrite:
    case rw_mode::interleave:
      return true;
    case rw_mode::rw:
    case rw_mode::randrw:
      return rwmixread < 100;
    default:
      return false;
  }
}

std::optional<std::uint64_t> parse_size(std::string_view text) {
  text = trim(text);
  if (text.empty()) return std::nullopt;
  std::uint64_t mult = 1;
  char last = static_cast<char>(std::tolower(static_cast<unsigned char>(text.back())));
  if (last == 'b' && text.size() > 1) {  // "4kb", "1MiB" style suffixes
    text.remove_suffix(1);
    if (!text.empty() && std::tolower(static_cast<unsigned char>(text.back())) == 'i') text.remove_suffix(1);
    if (text.empty()) return std::nullopt;
    last = static_cast<char>(std::tolower(static_cast<unsigned char>(text.back())));
  }
  switch (last) {
    case 'k':
      mult = 1ULL << 10;
      break;
    case 'm':
      mult = 1ULL << 20;
      break;
    case 'g':
      mult = 1ULL << 30;
      break;
    case 't':
      mult = 1ULL << 40;
      break;
    default:
      break;
  }
  if (mult != 1) text.remove_suffix(1);
  const auto n = parse_uint(text);
  if (!n) return std::nullopt;
  if (*n != 0 && mult > UINT64_MAX / *n) return std::nullopt;
  return *n * mult;
}

std::optional<parse_error> apply_setting(job_spec& s, std::string_view key_in, std::string_view value_in) {
  const std::string key = lower(trim(key_in));
  const std::string_view value = trim(value_in);
  auto size_of = [&](std::uint64_t& out, bool allow_zero) -> std::optional<parse_error> {
    const auto v = parse_size(value);
    if (!v || (!allow_zero && *v == 0))
      return bad(key, value,
                 allow_zero ? "a size such as 4k, 1M, 47008" : "a size > 0 such as 4k, 1M, 47008");
    out = *v;
    return std::nullopt;
  };
  auto uint_of = [&](auto& out, std::uint64_t lo, std::uint64_t hi) -> std::optional<parse_error> {
    const auto v = parse_uint(value);
    if (!v || *v < lo || *v > hi)
      return bad(key, value, "an integer in " + std::to_string(lo) + ".." + std::to_string(hi));
    out = static_cast<std::remove_reference_t<decltype(out)>>(*v);
    return std::nullopt;
  };
  // a decimal number (seconds, a factor, milliseconds) that `ok` accepts
  auto double_of = [&](double& out, auto ok, const char* allowed) -> std::optional<parse_error> {
    double v = 0;
    auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (ec != std::errc{} || p != value.data() + value.size() || !ok(v) || !std::isfinite(v))
      return bad(key, value, allowed);
    out = v;
    return std::nullopt;
  };
  auto bool_of = [&](bool& out) -> std::optional<parse_error> {
    const auto v = parse_bool(value);
    if (!v) return bad(key, value, "true/false (1/0, yes/no, on/off)");
    out = *v;
    return std::nullopt;
  };

  if (key == "name") {
    if (value.empty()) return bad(key, value, "a name");
    s.name = value;
    return std::nullopt;
  }
  if (key == "url" || key == "nfs_url") {
    if (value.rfind("nfs://", 0) != 0 || value.size() <= 6) return bad(key, value, "nfs://SERVER/EXPORT");
    s.url = value;
    return std::nullopt;
  }
  if (key == "nfs_version" || key == "vers") {
    if (value == "3")
      s.nfs_version = 3;
    else if (value == "4" || value == "4.0")
      s.nfs_version = 4;
    else
      return bad(key, value, "3 or 4 (libnfs 4.0 has no NFSv4 minor-version setting: 4 means 4.0)");
    return std::nullopt;
  }
  if (key == "rw" || key == "readwrite") {
    const std::string v = lower(value);
    if (v == "read")
      s.rw = rw_mode::read;
    else if (v == "write")
      s.rw = rw_mode::write;
    else if (v == "rw" || v == "readwrite")
      s.rw = rw_mode::rw;
    else if (v == "randread")
      s.rw = rw_mode::randread;
    else if (v == "randwrite")
      s.rw = rw_mode::randwrite;
    else if (v == "randrw")
      s.rw = rw_mode::randrw;
    else if (v == "interleave")
      s.rw = rw_mode::interleave;
    else if (v == "probe")
      s.rw = rw_mode::probe;
    else
      return bad(key, value, "read, write, rw, randread, randwrite, randrw, interleave or probe");
    return std::nullopt;
  }
  if (key == "rwmixread") return uint_of(s.rwmixread, 0, 100);
  if (key == "rwmixwrite") {
    unsigned w = 0;
    if (auto e = uint_of(w, 0, 100)) return e;
    s.rwmixread = 100 - w;
    return std::nullopt;
  }
  if (key == "bs" || key == "blocksize") return size_of(s.bs, false);
  if (key == "record" || key == "record_size") return size_of(s.record, false);
  if (key == "numjobs") return uint_of(s.numjobs, 1, 1024);
  if (key == "iodepth") return uint_of(s.iodepth, 1, 1024);
  if (key == "size" || key == "filesize") return size_of(s.size, false);
  if (key == "io_size" || key == "io_limit") return size_of(s.io_size, true);
  if (key == "time_based") return bool_of(s.time_based);
  if (key == "runtime")
    return double_of(
        s.runtime, [](double v) { return v > 0; }, "seconds > 0");
  if (key == "verify") {
    const auto l = lower(value);
    if (l == "pattern") {
      s.verify = true;
      return std::nullopt;
    }
    return bool_of(s.verify);
  }
  if (key == "seed" || key == "randseed") return uint_of(s.seed, 0, UINT64_MAX);
  if (key == "fsync") return uint_of(s.fsync, 0, UINT64_MAX);
  if (key == "layout") return bool_of(s.layout);
  if (key == "interleave_order") {
    const std::string v = lower(value);
    if (v == "shared")
      s.order = job_spec::record_order::shared;
    else if (v == "stride")
      s.order = job_spec::record_order::stride;
    else
      return bad(key, value, "shared or stride");
    return std::nullopt;
  }
  if (key == "commit_at_end") return bool_of(s.commit_at_end);
  if (key == "probe_interval_ms")
    return double_of(
        s.probe_interval_ms, [](double v) { return v >= 0 && v <= 60000; }, "milliseconds in 0..60000");
  if (key == "thinktime")
    return double_of(
        s.thinktime_us, [](double v) { return v >= 0 && v <= 60e6; }, "microseconds in 0..60000000");
  if (key == "pass_interval")
    return double_of(
        s.pass_interval, [](double v) { return v >= 0 && v <= 86400; }, "seconds in 0..86400");
  if (key == "pass_first")
    return double_of(
        s.pass_first, [](double v) { return v >= 0 && v <= 86400; }, "seconds in 0..86400");
  if (key == "truncate") return bool_of(s.truncate);
  if (key == "slow_writer")
    return double_of(
        s.slow_writer, [](double v) { return v >= 1 && v <= 100; }, "a factor in 1..100");
  if (key == "filename") {
    if (value.empty() || value.find('/') != std::string_view::npos)
      return bad(key, value, "a file name without '/'");
    s.filename = value;
    return std::nullopt;
  }
  // fio keys that mean nothing here but appear in fio job files
  if (key == "ioengine" || key == "group_reporting" || key == "direct") return std::nullopt;
  return parse_error{"unknown setting '" + std::string(key_in) + "'"};
}

std::optional<parse_error> parse_job_text(job_spec& s, std::string_view text, std::string_view origin) {
  unsigned line_no = 0;
  bool seen_job = false;
  std::string section;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    ++line_no;
    const auto where = std::string(origin) + ":" + std::to_string(line_no) + ": ";
    line = trim(line);
    if (line.empty() || line.front() == '#' || line.front() == ';') continue;
    if (line.front() == '[') {
      if (line.back() != ']' || line.size() < 3)
        return parse_error{where + "malformed section header '" + std::string(line) + "'"};
      section = std::string(trim(line.substr(1, line.size() - 2)));
      if (section != "global") {
        if (seen_job)
          return parse_error{where + "second job section [" + section +
                             "]: dcache-bench runs one job group per invocation"};
        seen_job = true;
        s.name = section;
      }
      continue;
    }
    if (section.empty()) return parse_error{where + "setting before any [section]"};
    const auto eq = line.find('=');
    std::optional<parse_error> e;
    if (eq == std::string_view::npos)
      e = apply_setting(s, line, "1");  // fio: bare key = true
    else
      e = apply_setting(s, line.substr(0, eq), line.substr(eq + 1));
    if (e) return parse_error{where + e->message};
  }
  return std::nullopt;
}

std::optional<parse_error> validate(const job_spec& s) {
  if (s.url.empty()) return parse_error{"no url: set url=nfs://SERVER/EXPORT (job file or --url)"};
  if (s.time_based && s.runtime <= 0) return parse_error{"time_based=1 needs runtime=SECONDS"};
  if (s.rw == rw_mode::interleave) {
    if (s.record < 4096)
      return parse_error{
          "interleave: record must be at least 4096 bytes so that a boundary page is shared by exactly two records"};
    if (s.size < s.record * 2) return parse_error{"interleave: size must hold at least two records"};
  } else if (s.bs > s.size) {
    return parse_error{"bs (" + std::to_string(s.bs) + ") is larger than size (" + std::to_string(s.size) +
                       ")"};
  }
  if (s.pass_interval > 0 && !s.time_based)
    return parse_error{"pass_interval needs time_based=1 and runtime (passes repeat until then)"};
  if (s.pass_interval > 0 && (s.rw == rw_mode::interleave || s.rw == rw_mode::probe))
    return parse_error{"pass_interval: not with rw=interleave or rw=probe"};
  if (s.truncate && (reads_at_all(s.rw, s.rwmixread) || is_random(s.rw)))
    return parse_error{"truncate=1 is for sequential write-only jobs (it would empty what the job reads)"};
  return std::nullopt;
}

}  // namespace dcache::bench

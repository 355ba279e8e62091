// dcache-fsx: a random-operation checker (in the spirit of fsx) over a real
// NFS client, for the stress test of every cache mode.
//
//   dcache-fsx --server HOST --export /PSEUDO [--proto 3|4.1] [--files N]
//              [--streams K] [--ops N] [--seed S] [--max-file BYTES]
//              [--max-len BYTES] [--mix T,C,R] [--depth D]
//              [--scenario appends] [--name PREFIX] [--quiet]
//
// Each of N files gets K streams, each a thread with its own connection.
// A stream does random operations on its file: WRITEs at odd and aligned
// offsets and sizes (UNSTABLE and FILE_SYNC; a lone stream also appends at
// or just past EOF, in bursts), READs checked byte for byte
// against a model of the file, truncates up and down, COMMITs.  With K > 1
// the file is cut into chunks of a random odd size, dealt to the streams
// round robin: a stream writes and reads only its own chunks, so the
// streams' edges share pages (what boundary tracking is for) and the model
// of each byte has exactly one writer; truncates stop every stream of the
// file for their duration.
//
// Exit status: 0 when every operation succeeded and every READ matched,
// 1 on the first mismatch or error (the operation, offsets and the last
// operations of that stream are printed), 2 on bad usage.
#include "nfs41_client.hpp"

#include <fcntl.h>
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

extern "C" {
#include <nfsc/libnfs.h>
}

namespace {

namespace v41 = dcache_e2e::nfs41;

struct options {
  std::string server = "127.0.0.1";
  std::string export_path;
  std::string proto = "3";
  std::string name = "fsx";
  unsigned files = 1;
  unsigned streams = 1;
  std::uint64_t ops = 10000;
  std::uint64_t seed = 1;
  std::uint64_t max_file = 1 << 20;
  std::uint64_t max_len = 256 << 10;
  // operation mix, percent: truncate, commit, read (the rest: write)
  unsigned pct_truncate = 8, pct_commit = 6, pct_read = 41;
  // WRITEs in flight at once: a WRITE op's range goes out as this many
  // adjacent pieces cut at odd offsets (NFSv3; v4.1 sends them in turn)
  unsigned depth = 1;
  bool scenario = false;  // --scenario appends: see run_scenario_round
  bool quiet = false;
};

// One connection's view of one file: the operations the checker needs.
// Every call returns 0 (or a byte count) or a negative errno / -(1000 +
// NFS status) for a protocol error, with a message in what().
class nfs_stream {
 public:
  virtual ~nfs_stream() = default;
  virtual long long write(std::uint64_t off, const std::uint8_t* p, std::size_t n, bool stable) = 0;
  // The adjacent pieces [cuts[i], cuts[i+1]) of one range, written with all
  // pieces in flight at once where the protocol client can (as a client
  // flushing its cache sends them); p holds the whole range from cuts[0].
  // Returns 0 or the first error.
  virtual long long write_pieces(const std::vector<std::uint64_t>& cuts, const std::uint8_t* p, bool stable) {
    for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
      const std::size_t n = cuts[i + 1] - cuts[i];
      const long long rc = write(cuts[i], p + (cuts[i] - cuts[0]), n, stable);
      if (rc != static_cast<long long>(n)) return rc < 0 ? rc : -EIO;
    }
    return 0;
  }
  virtual long long read(std::uint64_t off, std::uint8_t* p, std::size_t n) = 0;
  virtual int truncate(std::uint64_t size) = 0;
  virtual int commit() = 0;
  [[nodiscard]] const std::string& what() const { return _what; }

 protected:
  std::string _what;
};

class v3_stream final : public nfs_stream {
 public:
  v3_stream(const options& o, const std::string& file, bool create) {
    _nfs = nfs_init_context();
    if (_nfs == nullptr) throw std::runtime_error("nfs_init_context failed");
    nfs_set_version(_nfs, 3);
    nfs_set_timeout(_nfs, 120000);
    if (nfs_mount(_nfs, o.server.c_str(), o.export_path.c_str()) != 0)
      throw std::runtime_error("mount " + o.export_path + ": " + nfs_get_error(_nfs));
    const std::string path = "/" + file;
    int rc = create ? nfs_creat(_nfs, path.c_str(), 0644, &_unstable)
                    : nfs_open(_nfs, path.c_str(), O_RDWR, &_unstable);
    if (rc != 0) throw std::runtime_error("open " + path + ": " + nfs_get_error(_nfs));
    // libnfs sends FILE_SYNC WRITEs on a handle opened O_SYNC, UNSTABLE
    // on the other.
    if (nfs_open(_nfs, path.c_str(), O_RDWR | O_SYNC, &_sync) != 0)
      throw std::runtime_error("open O_SYNC " + path + ": " + nfs_get_error(_nfs));
  }
  ~v3_stream() override {
    if (_sync != nullptr) nfs_close(_nfs, _sync);
    if (_unstable != nullptr) nfs_close(_nfs, _unstable);
    if (_nfs != nullptr) nfs_destroy_context(_nfs);
  }
  long long write(std::uint64_t off, const std::uint8_t* p, std::size_t n, bool stable) override {
    std::size_t done = 0;
    while (done < n) {
      const int rc = nfs_pwrite(_nfs, stable ? _sync : _unstable, off + done, n - done,
                                const_cast<std::uint8_t*>(p + done));
      if (rc <= 0) return fail(rc == 0 ? -EIO : rc);
      done += static_cast<std::size_t>(rc);
    }
    return static_cast<long long>(done);
  }
  long long write_pieces(const std::vector<std::uint64_t>& cuts, const std::uint8_t* p,
                         bool stable) override {
    struct piece {
      std::uint64_t want;
      int status = 1;  // 1: in flight
      std::string error;
    };
    std::vector<piece> pieces(cuts.size() - 1);
    std::size_t in_flight = 0;
    for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
      pieces[i] = piece{cuts[i + 1] - cuts[i], 1, {}};
      const int rc = nfs_pwrite_async(
          _nfs, stable ? _sync : _unstable, cuts[i], pieces[i].want, p + (cuts[i] - cuts[0]),
          [](int err, struct nfs_context*, void* data, void* priv) {
            auto* pc = static_cast<piece*>(priv);
            pc->status = err < 0 ? err : (static_cast<std::uint64_t>(err) == pc->want ? 0 : -EIO);
            if (err < 0 && data != nullptr) pc->error = static_cast<const char*>(data);
          },
          &pieces[i]);
      if (rc != 0) {
        pieces[i].status = -EIO;
        pieces[i].error = nfs_get_error(_nfs);
        break;
      }
      ++in_flight;
    }
    auto busy = [&] {
      for (std::size_t i = 0; i < in_flight; ++i)
        if (pieces[i].status == 1) return true;
      return false;
    };
    while (busy()) {
      struct pollfd pfd {
        nfs_get_fd(_nfs), static_cast<short>(nfs_which_events(_nfs)), 0
      };
      if (poll(&pfd, 1, 1000) < 0 && errno != EINTR) return fail(-errno);
      if (nfs_service(_nfs, pfd.revents) < 0) return fail(-EIO);
    }
    for (const auto& pc : pieces) {
      if (pc.status != 0 && pc.status != 1) {
        _what = pc.error.empty() ? "short WRITE" : pc.error;
        return pc.status;
      }
    }
    return 0;
  }
  long long read(std::uint64_t off, std::uint8_t* p, std::size_t n) override {
    std::size_t done = 0;
    while (done < n) {
      const int rc = nfs_pread(_nfs, _unstable, off + done, n - done, p + done);
      if (rc < 0) return fail(rc);
      if (rc == 0) break;
      done += static_cast<std::size_t>(rc);
    }
    return static_cast<long long>(done);
  }
  int truncate(std::uint64_t size) override {
    return static_cast<int>(check(nfs_ftruncate(_nfs, _unstable, size)));
  }
  int commit() override { return static_cast<int>(check(nfs_fsync(_nfs, _unstable))); }

 private:
  long long check(int rc) { return rc < 0 ? fail(rc) : rc; }
  long long fail(int rc) {
    _what = nfs_get_error(_nfs);
    return rc;
  }
  struct nfs_context* _nfs = nullptr;
  struct nfsfh* _unstable = nullptr;
  struct nfsfh* _sync = nullptr;
};

class v41_stream final : public nfs_stream {
 public:
  v41_stream(const options& o, const std::string& file, bool create) : _c(o.server) {
    auto [st, dir] = _c.lookup_path(o.export_path);
    if (st != v41::NFS4_OK) throw std::runtime_error("lookup " + o.export_path + ": " + v41::status_name(st));
    v41::open_result r = _c.open(dir, file, create);
    if (r.status != v41::NFS4_OK)
      throw std::runtime_error("OPEN " + file + ": " + v41::status_name(r.status));
    _fh = r.fh;
    _sid = r.stateid;
  }
  ~v41_stream() override {
    try {
      (void)_c.close(_fh, _sid);
    } catch (...) {
    }
  }
  long long write(std::uint64_t off, const std::uint8_t* p, std::size_t n, bool stable) override {
    const v41::write_result r =
        _c.write_all(_fh, _sid, off, {p, n}, stable ? v41::stable_how::file_sync : v41::stable_how::unstable);
    if (r.status != v41::NFS4_OK) return fail("WRITE", r.status);
    if (stable && r.committed != v41::stable_how::file_sync) {
      _what = "WRITE FILE_SYNC answered with a weaker stability";
      return -EPROTO;
    }
    return r.count;
  }
  long long read(std::uint64_t off, std::uint8_t* p, std::size_t n) override {
    const v41::read_result r = _c.read_all(_fh, _sid, off, n);
    if (r.status != v41::NFS4_OK) return fail("READ", r.status);
    const std::size_t k = std::min(n, r.data.size());
    std::memcpy(p, r.data.data(), k);
    return static_cast<long long>(k);
  }
  int truncate(std::uint64_t size) override {
    const std::uint32_t st = _c.truncate(_fh, _sid, size);
    return st == v41::NFS4_OK ? 0 : static_cast<int>(fail("SETATTR", st));
  }
  int commit() override {
    const v41::write_result r = _c.commit(_fh, 0, 0);
    return r.status == v41::NFS4_OK ? 0 : static_cast<int>(fail("COMMIT", r.status));
  }

 private:
  long long fail(const char* op, std::uint32_t st) {
    _what = std::string(op) + ": " + v41::status_name(st);
    return -1000 - static_cast<long long>(st);
  }
  v41::client _c;
  v41::bytes _fh;
  v41::stateid4 _sid;
};

std::unique_ptr<nfs_stream> connect(const options& o, const std::string& file, bool create) {
  if (o.proto == "3") return std::make_unique<v3_stream>(o, file, create);
  return std::make_unique<v41_stream>(o, file, create);
}

// The model of one file shared by its streams.  Bytes have one writer
// each (chunk ownership); size and truncates are guarded by `gate`:
// operations take it shared, a truncate exclusive.
struct file_model {
  std::string name;
  std::shared_mutex gate;
  std::vector<std::uint8_t> bytes;     // max_file bytes, 0 beyond size
  std::atomic<std::uint64_t> size{0};  // lower bound of the file size
  std::uint64_t chunk = 0;             // 0: one stream owns everything
  unsigned streams = 1;
};

std::atomic<bool> g_failed{false};
std::atomic<std::uint64_t> g_ops{0};

struct stream_state {
  const options& o;
  file_model& m;
  unsigned index;
  std::mt19937_64 rng;
  std::deque<std::string> history;  // the last operations, for a failure report
  unsigned appends_left = 0;        // WRITEs left in the current burst of appends
  std::uint64_t ops_done = 0;
  std::vector<std::uint8_t> buf;

  std::uint64_t uniform(std::uint64_t lo, std::uint64_t hi) {  // [lo, hi]
    return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng);
  }
  void note(std::string line) {
    ++ops_done;
    history.push_back(std::move(line));
    if (history.size() > 24) history.pop_front();
  }
  // A range [off, off+len) this stream may touch, inside [0, max_file).
  std::pair<std::uint64_t, std::uint64_t> pick_range() {
    std::uint64_t lo = 0, hi = o.max_file;
    if (m.streams > 1) {
      const std::uint64_t chunks = o.max_file / m.chunk;
      const std::uint64_t c = index + m.streams * uniform(0, (chunks - 1 - index) / m.streams);
      lo = c * m.chunk;
      hi = lo + m.chunk;
      // half of the time the whole chunk: both its edges share a page
      // with a neighbour's chunk
      if (uniform(0, 1) == 0) return {lo, m.chunk};
    }
    std::uint64_t len = 1 + uniform(0, std::min(o.max_len, hi - lo) - 1);
    std::uint64_t off = lo + uniform(0, hi - lo - len);
    // a third of the WRITEs page-aligned at both ends when they can be
    if (uniform(0, 2) == 0 && len >= 8192) {
      const std::uint64_t a0 = (off + 4095) / 4096 * 4096, a1 = (off + len) / 4096 * 4096;
      if (a1 > a0 && a0 >= lo) {
        off = a0;
        len = a1 - a0;
      }
    }
    return {off, len};
  }
};

[[noreturn]] void fail(stream_state& s, const std::string& why) {
  bool first = !g_failed.exchange(true);
  if (first) {
    std::fprintf(stderr, "dcache-fsx: %s stream %u: %s\n  last operations of this stream (oldest first):\n",
                 s.m.name.c_str(), s.index, why.c_str());
    for (const auto& h : s.history) std::fprintf(stderr, "    %s\n", h.c_str());
  }
  throw std::runtime_error(why);
}

void write_at(stream_state& s, nfs_stream& n, std::uint64_t off, std::uint64_t len, bool stable) {
  s.buf.resize(len);
  for (auto& b : s.buf) b = static_cast<std::uint8_t>(s.rng() | 1);  // never 0: a lost write shows
  s.note("WRITE " + std::to_string(off) + " +" + std::to_string(len) + (stable ? " FILE_SYNC" : " UNSTABLE"));
  std::vector<std::uint64_t> cuts{off};
  for (unsigned i = 1; i < s.o.depth && cuts.back() - off + 1 < len; ++i)
    cuts.push_back(off + s.uniform(cuts.back() - off + 1, len - 1));
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  cuts.push_back(off + len);
  std::shared_lock lock(s.m.gate);
  const long long rc =
      cuts.size() > 2 ? n.write_pieces(cuts, s.buf.data(), stable) : n.write(off, s.buf.data(), len, stable);
  if (rc != (cuts.size() > 2 ? 0 : static_cast<long long>(len)))
    fail(s, "WRITE " + std::to_string(off) + "+" + std::to_string(len) + " (" +
                std::to_string(cuts.size() - 1) + " piece(s)) returned " + std::to_string(rc) + ": " +
                n.what());
  std::memcpy(s.m.bytes.data() + off, s.buf.data(), len);
  std::uint64_t cur = s.m.size.load();
  while (cur < off + len && !s.m.size.compare_exchange_weak(cur, off + len)) {
  }
}

void do_write(stream_state& s, nfs_stream& n) {
  auto [off, len] = s.pick_range();
  if (s.m.streams == 1 && (s.appends_left > 0 || s.uniform(0, 7) == 0)) {
    // appends, in bursts of 1-12 WRITEs: at the end of the file or a
    // little past it, as a log or a client flushing a growing file writes
    if (s.appends_left == 0) s.appends_left = static_cast<unsigned>(s.uniform(1, 12));
    --s.appends_left;
    const std::uint64_t size = s.m.size.load();
    off = std::min<std::uint64_t>(size + (s.uniform(0, 3) ? 0 : s.uniform(1, 3 * 4096)), s.o.max_file - 1);
    len = std::min<std::uint64_t>(1 + s.uniform(0, std::min<std::uint64_t>(s.o.max_len, 65536) - 1),
                                  s.o.max_file - off);
  }
  write_at(s, n, off, len, s.uniform(0, 3) == 0);
}

void read_at(stream_state& s, nfs_stream& n, std::uint64_t off, std::uint64_t len) {
  s.note("READ " + std::to_string(off) + " +" + std::to_string(len));
  std::shared_lock lock(s.m.gate);
  const std::uint64_t size_before = s.m.size.load();
  s.buf.assign(len, 0xee);
  const long long rc = n.read(off, s.buf.data(), len);
  if (rc < 0) fail(s, "READ " + std::to_string(off) + "+" + std::to_string(len) + " failed: " + n.what());
  const std::uint64_t got = static_cast<std::uint64_t>(rc);
  // At least what every completed WRITE put below the size must be there.
  const std::uint64_t want_min = size_before > off ? std::min(len, size_before - off) : 0;
  if (got < want_min)
    fail(s, "READ " + std::to_string(off) + "+" + std::to_string(len) + " returned " + std::to_string(got) +
                " bytes, the file holds at least " + std::to_string(size_before));
  for (std::uint64_t i = 0; i < got; ++i) {
    if (s.buf[i] != s.m.bytes[off + i]) {
      char why[200];
      std::snprintf(why, sizeof(why),
                    "READ %" PRIu64 "+%" PRIu64 ": byte at %" PRIu64 " is 0x%02x, expected 0x%02x", off, len,
                    off + i, s.buf[i], s.m.bytes[off + i]);
      fail(s, why);
    }
  }
}

void do_read(stream_state& s, nfs_stream& n) {
  auto [off, len] = s.pick_range();
  read_at(s, n, off, len);
}

void truncate_to(stream_state& s, nfs_stream& n, std::uint64_t size) {
  s.note("TRUNCATE " + std::to_string(size));
  std::unique_lock lock(s.m.gate);  // every stream of the file waits
  const int rc = n.truncate(size);
  if (rc != 0) fail(s, "TRUNCATE " + std::to_string(size) + " failed: " + n.what());
  const std::uint64_t old = s.m.size.load();
  if (size < old) std::fill(s.m.bytes.begin() + static_cast<std::ptrdiff_t>(size), s.m.bytes.end(), 0);
  s.m.size.store(size);
}

void do_truncate(stream_state& s, nfs_stream& n) {
  truncate_to(s, n, s.uniform(0, s.o.max_file));
}

void do_commit(stream_state& s, nfs_stream& n) {
  s.note("COMMIT");
  std::shared_lock lock(s.m.gate);
  if (n.commit() != 0) fail(s, "COMMIT failed: " + n.what());
}

// --scenario appends: what an appending client does to a file that has a
// few holes, with randomised sizes: the file is emptied; some separate
// one-page WRITEs leave it fragmented (8-14 extents: around the number a
// 512-byte XFS inode holds before its extent list becomes a btree); a small
// WRITE lands a little past EOF, inside one page (a boundary page, held
// cached by the tracker, with the filesystem's speculative preallocation
// behind it); then page-aligned appends follow it, and one last operation
// of a random kind (a small WRITE at EOF, a truncate up, an aligned WRITE
// past EOF, a COMMIT, a FILE_SYNC WRITE).  The whole file is read back and
// checked after each round.
void run_scenario_round(stream_state& s, nfs_stream& n) {
  constexpr std::uint64_t page = 4096;
  truncate_to(s, n, 0);
  const std::uint64_t others = s.uniform(8, 14);
  for (std::uint64_t i = 0; i < others; ++i) write_at(s, n, 2 * i * page, page, false);
  const std::uint64_t e = (2 * others + 10 + 15) / 16 * 16;
  write_at(s, n, e * page + s.uniform(0, 512), s.uniform(100, 3000), false);
  std::uint64_t pos = e + 1;
  const std::uint64_t appends = s.uniform(3, 9);
  for (std::uint64_t i = 0; i < appends && (pos + 4) * page <= s.o.max_file; ++i) {
    const std::uint64_t pages = s.uniform(1, 3);
    write_at(s, n, pos * page, pages * page, false);
    pos += pages;
  }
  switch (s.uniform(0, 4)) {
    case 0:
      write_at(s, n, pos * page, s.uniform(1, 3000), false);
      break;
    case 1:
      truncate_to(s, n, std::min(s.o.max_file, (pos + 8) * page));
      break;
    case 2:
      if ((pos + 7) * page <= s.o.max_file) write_at(s, n, (pos + 6) * page, page, false);
      break;
    case 3:
      do_commit(s, n);
      break;
    case 4:
      write_at(s, n, pos * page, s.uniform(1, 3000), true);
      break;
  }
  read_at(s, n, 0, std::min(s.o.max_file, s.m.size.load() + page));
}

void run_stream(const options& o, file_model& m, unsigned index, std::uint64_t seed) {
  stream_state s{o, m, index, std::mt19937_64(seed), {}, 0, 0, {}};
  try {
    std::unique_ptr<nfs_stream> n = connect(o, m.name, false);
    if (o.scenario) {
      while (s.ops_done < o.ops && !g_failed.load()) run_scenario_round(s, *n);
      g_ops.fetch_add(s.ops_done, std::memory_order_relaxed);
      return;
    }
    for (std::uint64_t i = 0; i < o.ops && !g_failed.load(); ++i) {
      const std::uint64_t r = s.uniform(0, 99);
      // truncates by the file's first stream only (they stop the others)
      if (r < o.pct_truncate) {
        if (index == 0) do_truncate(s, *n);
      } else if (r < o.pct_truncate + o.pct_commit)
        do_commit(s, *n);
      else if (r < o.pct_truncate + o.pct_commit + o.pct_read)
        do_read(s, *n);
      else
        do_write(s, *n);
      g_ops.fetch_add(1, std::memory_order_relaxed);
    }
  } catch (const std::exception& e) {
    if (!g_failed.exchange(true))
      std::fprintf(stderr, "dcache-fsx: %s stream %u: %s\n", m.name.c_str(), index, e.what());
  }
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(
      stderr,
      "dcache-fsx: %s\nusage: dcache-fsx --export /PSEUDO [--server HOST] [--proto 3|4.1] "
      "[--files N] [--streams K] [--ops N] [--seed S] [--max-file B] [--max-len B] [--mix T,C,R] [--depth D] [--scenario appends] [--name P] [--quiet]\n",
      why);
  std::exit(2);
}

std::uint64_t number(const char* flag, const char* v) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || *v == '-')
    usage((std::string(flag) + ": not a number: " + v).c_str());
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&]() -> const char* {
      if (i + 1 >= argc) usage((a + " needs a value").c_str());
      return argv[++i];
    };
    if (a == "--server")
      o.server = val();
    else if (a == "--export")
      o.export_path = val();
    else if (a == "--proto")
      o.proto = val();
    else if (a == "--name")
      o.name = val();
    else if (a == "--files")
      o.files = static_cast<unsigned>(number("--files", val()));
    else if (a == "--streams")
      o.streams = static_cast<unsigned>(number("--streams", val()));
    else if (a == "--ops")
      o.ops = number("--ops", val());
    else if (a == "--seed")
      o.seed = number("--seed", val());
    else if (a == "--max-file")
      o.max_file = number("--max-file", val());
    else if (a == "--max-len")
      o.max_len = number("--max-len", val());
    else if (a == "--mix") {
      // TRUNCATE,COMMIT,READ percentages; WRITE gets the rest
      unsigned t = 0, c = 0, r = 0;
      if (std::sscanf(val(), "%u,%u,%u", &t, &c, &r) != 3 || t + c + r > 100)
        usage("--mix takes TRUNCATE,COMMIT,READ percentages adding up to at most 100");
      o.pct_truncate = t;
      o.pct_commit = c;
      o.pct_read = r;
    } else if (a == "--depth")
      o.depth = static_cast<unsigned>(number("--depth", val()));
    else if (a == "--scenario") {
      if (std::string(val()) != "appends") usage("--scenario: the one scenario is 'appends'");
      o.scenario = true;
    } else if (a == "--quiet")
      o.quiet = true;
    else
      usage(("unknown argument " + a).c_str());
  }
  if (o.export_path.empty()) usage("--export is required");
  if (o.proto != "3" && o.proto != "4.1") usage("--proto must be 3 or 4.1");
  if (o.files == 0 || o.streams == 0 || o.max_len == 0 || o.depth == 0 || o.max_file < 16 * o.streams)
    usage("--files, --streams, --depth, --max-len must be > 0 and --max-file >= 16 x streams");
  if (o.scenario && (o.streams != 1 || o.max_file < (1 << 20)))
    usage("--scenario appends needs --streams 1 and --max-file of at least 1 MiB");

  std::mt19937_64 root(o.seed);
  std::vector<std::unique_ptr<file_model>> models;
  for (unsigned f = 0; f < o.files; ++f) {
    auto m = std::make_unique<file_model>();
    m->name = o.name + "." + std::to_string(o.seed) + "." + std::to_string(f);
    m->bytes.assign(o.max_file, 0);
    m->streams = o.streams;
    if (o.streams > 1) {
      // an odd chunk size, so chunk edges fall inside pages
      const std::uint64_t most = std::max<std::uint64_t>(o.max_file / (2 * o.streams), 8);
      m->chunk = std::uniform_int_distribution<std::uint64_t>(most / 2, most)(root) | 1;
    }
    try {
      auto creator = connect(o, m->name, true);  // creates it empty
      if (creator->truncate(0) != 0) throw std::runtime_error("truncate: " + creator->what());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "dcache-fsx: cannot create %s on %s: %s\n", m->name.c_str(), o.export_path.c_str(),
                   e.what());
      return 1;
    }
    models.push_back(std::move(m));
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (auto& m : models)
    for (unsigned k = 0; k < o.streams; ++k)
      threads.emplace_back(run_stream, std::cref(o), std::ref(*m), k, root());
  for (auto& t : threads) t.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (g_failed.load()) return 1;
  if (!o.quiet)
    std::printf("dcache-fsx: %s over NFSv%s: %u file(s) x %u stream(s), %" PRIu64
                " operations in %.1f s, all READs matched\n",
                o.export_path.c_str(), o.proto.c_str(), o.files, o.streams, g_ops.load(), secs);
  return 0;
}

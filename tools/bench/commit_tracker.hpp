// COMMIT behaviour of the Linux NFS client, as a value: a file needs a
// COMMIT at close/fsync only if some WRITE since the last COMMIT was
// answered UNSTABLE (DATA_SYNC and FILE_SYNC replies are already durable).
// Also counts WRITE replies by stability, COMMITs sent and saved, and write
// verifier changes (a changed verifier means the server lost unstable data
// and the client would have to resend).
//
// Thread-safety: none; one tracker per open file, used by the thread that
// drives that file's connection.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>

namespace dcache::bench {

enum class stability : int { unstable = 0, data_sync = 1, file_sync = 2, unknown = 3 };

struct commit_counts {
  std::uint64_t writes_unstable = 0;
  std::uint64_t writes_data_sync = 0;
  std::uint64_t writes_file_sync = 0;
  std::uint64_t writes_unknown = 0;  // NFSv4 through libnfs's high-level API: reply hidden
  std::uint64_t commits_sent = 0;
  std::uint64_t commits_saved = 0;  // flush points where every WRITE was already stable
  std::uint64_t verifier_changes = 0;

  commit_counts& operator+=(const commit_counts& o) {
    writes_unstable += o.writes_unstable;
    writes_data_sync += o.writes_data_sync;
    writes_file_sync += o.writes_file_sync;
    writes_unknown += o.writes_unknown;
    commits_sent += o.commits_sent;
    commits_saved += o.commits_saved;
    verifier_changes += o.verifier_changes;
    return *this;
  }
};

class commit_tracker {
 public:
  using verifier = std::array<unsigned char, 8>;

  // A WRITE reply arrived with this stability (and verifier, if known).
  void on_write_reply(stability s, const verifier* verf = nullptr) {
    switch (s) {
      case stability::unstable:
        ++_counts.writes_unstable;
        _dirty = true;
        break;
      case stability::data_sync:
        ++_counts.writes_data_sync;
        break;
      case stability::file_sync:
        ++_counts.writes_file_sync;
        break;
      // unknown stability must be treated as unstable: that is what a
      // careful client does when it cannot see the reply
      case stability::unknown:
        ++_counts.writes_unknown;
        _dirty = true;
        break;
    }
    if (verf) note_verifier(*verf);
  }

  // At close or fsync: should a COMMIT be sent? Counts a saved COMMIT when
  // some WRITE happened since the last flush point but all were stable.
  [[nodiscard]] bool flush_point() {
    if (_dirty) return true;
    if (_writes_since_flush()) ++_counts.commits_saved;
    _mark_flushed();
    return false;
  }

  // The COMMIT that flush_point() asked for was sent and answered.
  void on_commit_reply(const verifier* verf = nullptr) {
    ++_counts.commits_sent;
    _dirty = false;
    if (verf) note_verifier(*verf);
    _mark_flushed();
  }

  [[nodiscard]] bool needs_commit() const { return _dirty; }
  [[nodiscard]] const commit_counts& counts() const { return _counts; }

 private:
  void note_verifier(const verifier& v) {
    if (_have_verf && std::memcmp(v.data(), _verf.data(), v.size()) != 0) ++_counts.verifier_changes;
    _verf = v;
    _have_verf = true;
  }
  std::uint64_t total_writes() const {
    return _counts.writes_unstable + _counts.writes_data_sync + _counts.writes_file_sync +
           _counts.writes_unknown;
  }
  bool _writes_since_flush() const { return total_writes() != _writes_at_flush; }
  void _mark_flushed() { _writes_at_flush = total_writes(); }

  commit_counts _counts;
  bool _dirty = false;
  std::uint64_t _writes_at_flush = 0;
  verifier _verf{};
  bool _have_verf = false;
};

}  // namespace dcache::bench

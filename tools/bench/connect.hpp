// A job's NFS side before it runs: the URL's server and export, one mounted
// nfs_context and one open file per job, and a file's size.
//
// Thread-safety: none; called by the thread that drives the engine, before
// and between its phases.
#pragma once

#include <cstdint>
#include <string>

#include "engine.hpp"

namespace dcache::bench {

// nfs://SERVER/EXPORT[?...] (validate checked the nfs:// prefix) as SERVER
// and /EXPORT, without the query; false when either is missing.
[[nodiscard]] bool split_url(const std::string& url, std::string& server, std::string& exp);

// Connects numjobs contexts and opens each job's file (interleave: one file
// shared by all). Creates files that do not exist.
[[nodiscard]] bool connect_all(engine& e, std::string& err);

// The size of c's file; 0 when its GETATTR fails.
[[nodiscard]] std::uint64_t file_size(engine& e, conn& c);

}  // namespace dcache::bench

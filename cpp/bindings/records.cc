// Binding of lsio/records.h for python/lsio/records.py (zrecord stores). The offset table
// arrives as a buffer (the store's mmap); payload buffers as numpy arrays. Corrupt payloads
// are reported back as (position, message) rather than raised: Python knows each position's
// record id, chunk file and byte range, and raises lsio.CorruptDataError naming them.
#include <fcntl.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "buffer.h"
#include "errors.h"
#include "gil.h"
#include "lsio/records.h"
#include "ranges.h"

namespace py = pybind11;

namespace lsio_py {
namespace {

using I64 = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;
using U8 = py::array_t<uint8_t, py::array::c_style | py::array::forcecast>;

lsio::RecordCompression Kind(int kind) {
  if (kind < 0 || kind > 2) ThrowStatus(lsio::Status::InvalidArgument("unknown record compression " + std::to_string(kind)));
  return static_cast<lsio::RecordCompression>(kind);
}

uint64_t TableEntries(const BufferView& table, uint64_t count) {
  if (count > table.size() / lsio::kRecordEntryBytes) {
    ThrowStatus(lsio::Status::InvalidArgument("the offset table buffer holds " +
                                              std::to_string(table.size() / lsio::kRecordEntryBytes) + " entries, not " +
                                              std::to_string(count)));
  }
  return count;
}

py::tuple LoadEntries(const py::object& table_obj, uint64_t count, const I64& ids) {
  BufferView table(table_obj, "table", false);
  TableEntries(table, count);
  const size_t n = static_cast<size_t>(ids.size());
  std::vector<lsio::RecordEntry> e(n);
  lsio::Status st = lsio::LoadRecordEntries(table.data(), count, {ids.data(), n}, e.data());
  if (!st.ok()) ThrowStatus(st);
  U32 chunk(n);
  U64 offset(n);
  U32 length(n);
  for (size_t i = 0; i < n; ++i) {
    chunk.mutable_data()[i] = e[i].chunk;
    offset.mutable_data()[i] = e[i].offset;
    length.mutable_data()[i] = e[i].length;
  }
  return py::make_tuple(chunk, offset, length);
}

void StoreEntries(const py::object& table_obj, uint64_t count, const I64& ids, const U32& chunk, const U64& offset,
                  const U32& length) {
  BufferView table(table_obj, "table", true);
  TableEntries(table, count);
  const size_t n = static_cast<size_t>(ids.size());
  if (static_cast<size_t>(chunk.size()) != n || static_cast<size_t>(offset.size()) != n ||
      static_cast<size_t>(length.size()) != n) {
    ThrowStatus(lsio::Status::InvalidArgument("ids, chunk, offset and length differ in length"));
  }
  std::vector<lsio::RecordEntry> e(n);
  for (size_t i = 0; i < n; ++i) e[i] = {chunk.data()[i], offset.data()[i], length.data()[i]};
  lsio::Status st = lsio::StoreRecordEntries(table.data(), count, {ids.data(), n}, e);
  if (!st.ok()) ThrowStatus(st);
}

py::tuple Compress(int kind, int level, const py::object& values_obj, const U64& offsets, int threads) {
  BufferView values(values_obj, "values", false);
  std::vector<uint8_t> out;
  std::vector<uint64_t> out_offsets;
  const lsio::Status st = WithoutGil([&] {
    return lsio::CompressRecords(Kind(kind), level, values.data(), values.size(),
                                 {offsets.data(), static_cast<size_t>(offsets.size())}, threads, &out, &out_offsets);
  });
  if (!st.ok()) ThrowStatus(st);
  U8 payload(static_cast<py::ssize_t>(out.size()));
  if (!out.empty()) std::memcpy(payload.mutable_data(), out.data(), out.size());
  U64 po(static_cast<py::ssize_t>(out_offsets.size()));
  if (!out_offsets.empty()) std::memcpy(po.mutable_data(), out_offsets.data(), out_offsets.size() * 8);
  return py::make_tuple(payload, po);
}

// Records read by records_gather (some decoded already), until place() lays them out in
// the caller's array (sized from sizes()). Holds the exports of the payload buffers they
// were read into, so those cannot be resized or freed meanwhile (released with the GIL held,
// when the object goes).
class Gathered {
 public:
  lsio::GatheredRecords records;
  std::vector<std::unique_ptr<BufferView>> payload_buffers;

  py::array_t<uint64_t> Sizes() const {
    py::array_t<uint64_t> out(static_cast<py::ssize_t>(records.sizes.size()));
    if (!records.sizes.empty()) {
      std::memcpy(out.mutable_data(), records.sizes.data(), records.sizes.size() * sizeof(uint64_t));
    }
    return out;
  }

  // (failed position or -1, message): a corrupt payload, for Python to name its record.
  py::tuple Place(const py::object& out, const U64& offsets, int threads) const {
    const size_t n = records.sizes.size();
    if (static_cast<size_t>(offsets.size()) != n) {
      ThrowStatus(lsio::Status::InvalidArgument("offsets has " + std::to_string(offsets.size()) + " entries for " +
                                                std::to_string(n) + " records"));
    }
    BufferView dst(out, "out", true);
    for (const auto& b : payload_buffers) {  // decoding in place must not overwrite payloads
      if (dst.data() < b->data() + b->size() && b->data() < dst.data() + dst.size()) {
        ThrowStatus(lsio::Status::InvalidArgument("out overlaps the buffer the payloads were read into"));
      }
    }
    // Places must lie inside out and not overlap (two workers would write the same bytes).
    std::vector<size_t> order;
    order.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      const uint64_t a = offsets.data()[i];
      if (a > dst.size() || records.sizes[i] > dst.size() - a) {
        ThrowStatus(lsio::Status::InvalidArgument("record " + std::to_string(i) + " lies outside out"));
      }
      if (records.sizes[i] > 0) order.push_back(i);
    }
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return offsets.data()[a] < offsets.data()[b]; });
    for (size_t k = 1; k < order.size(); ++k) {
      if (offsets.data()[order[k - 1]] + records.sizes[order[k - 1]] > offsets.data()[order[k]]) {
        ThrowStatus(lsio::Status::InvalidArgument("the places of records " + std::to_string(order[k - 1]) + " and " +
                                                  std::to_string(order[k]) + " overlap"));
      }
    }
    size_t failed = 0;
    const lsio::Status st =
        WithoutGil([&] { return lsio::PlaceRecords(records, dst.data(), {offsets.data(), n}, threads, &failed); });
    if (st.ok()) return py::make_tuple(int64_t{-1}, std::string());
    if (st.code() != lsio::StatusCode::kDataLoss) ThrowStatus(st);
    return py::make_tuple(static_cast<int64_t>(failed), st.message());
  }
};

// Reads the payloads (as read_ranges, into `out` at out_offsets), decoding those that come
// from the disk as they land: (Gathered, -1, "") or (None, failed position, message) for a
// corrupt payload.
py::tuple Gather(int kind, const py::list& sources, const U32& source_index, const U64& offsets, const U64& lengths,
                 const py::object& out, const py::object& out_offsets, int threads, const std::string& io,
                 unsigned queue_depth, std::optional<uint64_t> max_gap, uint64_t max_request) {
  const lsio::RecordCompression k = Kind(kind);
  RangeCall call = PrepareRangeCall(sources, source_index, offsets, lengths, out, out_offsets, threads, io,
                                    queue_depth, max_gap, max_request);
  auto gathered = std::make_unique<Gathered>();
  size_t failed = SIZE_MAX;  // set by GatherRecords for a corrupt payload only
  const lsio::Status st = WithoutGil([&](const std::function<bool()>& interrupted) {
    return lsio::GatherRecords(k, call.sources, call.ranges, call.options, interrupted, &gathered->records, &failed);
  });
  if (st.ok()) {
    gathered->payload_buffers = std::move(call.held);
    return py::make_tuple(py::cast(std::move(gathered)), int64_t{-1}, std::string());
  }
  // A reader's own kDataLoss (a file cut short during the call) names its file and range.
  if (st.code() != lsio::StatusCode::kDataLoss || failed >= call.ranges.size()) ThrowStatus(st);
  return py::make_tuple(py::none(), static_cast<int64_t>(failed), st.message());
}

// A whole file mapped read-only, its descriptor closed at once: Python's mmap keeps a
// duplicate descriptor per mapping (before 3.13), and a store's views could then exhaust the
// process's descriptors, one per chunk file.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      const int e = errno;
      ThrowStatus(lsio::Status::IoError("cannot open the file", e).WithPath(path));
    }
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      const int e = errno;
      ::close(fd);
      ThrowStatus(lsio::Status::IoError("cannot stat the file", e).WithPath(path));
    }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
      if (p == MAP_FAILED) {
        const int e = errno;
        ::close(fd);
        ThrowStatus(lsio::Status::IoError("cannot map the file", e).WithPath(path));
      }
      data_ = static_cast<uint8_t*>(p);
    }
    ::close(fd);
  }
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(data_, size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  size_t size() const { return size_; }
  py::buffer_info Info() const {
    static uint8_t empty = 0;
    return py::buffer_info(data_ != nullptr ? data_ : &empty, 1, py::format_descriptor<uint8_t>::format(), 1,
                           {static_cast<py::ssize_t>(size_)}, {py::ssize_t{1}}, /*readonly=*/true);
  }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace

void BindRecords(py::module_& m) {
  py::class_<MappedFile>(m, "MappedFile", py::buffer_protocol(),
                         "A file mapped read-only (no descriptor kept); a read-only buffer of its bytes.")
      .def(py::init<const std::string&>(), py::arg("path"))
      .def("__len__", &MappedFile::size)
      .def_buffer(&MappedFile::Info);
  m.def("records_load_entries", &LoadEntries, py::arg("table"), py::arg("count"), py::arg("ids"),
        "Entries of a zrecord offset table: (chunk u32, offset u64, length u32) arrays, each entry one 16-byte load.");
  m.def("records_store_entries", &StoreEntries, py::arg("table"), py::arg("count"), py::arg("ids"), py::arg("chunk"),
        py::arg("offset"), py::arg("length"), "Stores entries at ids, each as one 16-byte store.");
  m.def("records_compress", &Compress, py::arg("kind"), py::arg("level"), py::arg("values"), py::arg("offsets"),
        py::arg("threads") = 0, "Compresses records in parallel: (payloads uint8, payload offsets uint64).");
  py::class_<Gathered>(m, "GatheredRecords", "Records decoded by records_gather, not yet laid out.")
      .def("sizes", &Gathered::Sizes, "Each record's decoded size in bytes.")
      .def("place", &Gathered::Place, py::arg("out"), py::arg("offsets"), py::arg("threads") = 0,
           "Lays record i out at out[offsets[i]:] (copied, or decoded there), in parallel, GIL released: "
           "(failed position or -1, message).");
  m.def("records_gather", &Gather, py::arg("kind"), py::arg("sources"), py::arg("source_index"), py::arg("offsets"),
        py::arg("lengths"), py::arg("out"), py::arg("out_offsets"), py::arg("threads") = 0, py::arg("io") = "auto",
        py::arg("queue_depth") = 64, py::arg("max_gap") = py::none(), py::arg("max_request") = 0,
        "Reads payloads (as read_ranges), decoding those the disk delivers as they land, GIL released: "
        "(GatheredRecords, -1, '') or (None, failed position, message).");
}

}  // namespace lsio_py

// Built only with Arrow (SLUICE_WITH_ARROW), as C++20.
#include "sluice/io/arrow_ipc_batch.h"

#include <arrow/ipc/dictionary.h>
#include <arrow/ipc/message.h>
#include <arrow/ipc/reader.h>
#include <arrow/type.h>

#include "absl/strings/str_cat.h"

namespace sluice::io {
namespace {

bool HasDictionaries(const arrow::DataType& type) {
  if (type.id() == arrow::Type::DICTIONARY) return true;
  for (const std::shared_ptr<arrow::Field>& child : type.fields()) {
    if (HasDictionaries(*child->type())) return true;
  }
  return false;
}

bool HasDictionaries(const arrow::Schema& schema) {
  for (const std::shared_ptr<arrow::Field>& field : schema.fields()) {
    if (HasDictionaries(*field->type())) return true;
  }
  return false;
}

absl::Status Damaged(const arrow::Status& s, const std::string& where) {
  return absl::DataLossError(absl::StrCat("cannot read ", where, ": ", s.ToString()));
}

arrow::Result<std::shared_ptr<arrow::RecordBatch>> ReadThroughFooter(
    const std::shared_ptr<arrow::io::RandomAccessFile>& file, int index, const arrow::ipc::IpcReadOptions& options) {
  ARROW_ASSIGN_OR_RAISE(auto reader, arrow::ipc::RecordBatchFileReader::Open(file, options));
  return reader->ReadRecordBatch(index);
}

arrow::Result<std::shared_ptr<arrow::RecordBatch>> ReadFromBlock(arrow::io::RandomAccessFile& file,
                                                                 const ListedIpcFile& listed, int index,
                                                                 const arrow::ipc::IpcReadOptions& options) {
  const IpcRecordBatch& block = listed.batches[index];
  ARROW_ASSIGN_OR_RAISE(std::unique_ptr<arrow::ipc::Message> message,
                        arrow::ipc::ReadMessage(block.offset, block.metadata_length, block.body_length, &file));
  if (message == nullptr || message->type() != arrow::ipc::MessageType::RECORD_BATCH) {
    return arrow::Status::Invalid("the message at offset ", block.offset, " is not a record batch");
  }
  const arrow::ipc::DictionaryMemo none;
  return arrow::ipc::ReadRecordBatch(*message, listed.schema, &none, options);
}

}  // namespace

absl::StatusOr<std::shared_ptr<arrow::RecordBatch>> ReadIpcRecordBatch(
    const std::shared_ptr<arrow::io::RandomAccessFile>& file, const ListedIpcFile& listed, int index,
    const arrow::ipc::IpcReadOptions& options, const std::string& where) {
  const arrow::Result<std::shared_ptr<arrow::RecordBatch>> batch = HasDictionaries(*listed.schema)
                                                                       ? ReadThroughFooter(file, index, options)
                                                                       : ReadFromBlock(*file, listed, index, options);
  if (!batch.ok()) return Damaged(batch.status(), where);
  if ((*batch)->num_rows() != listed.batches[index].rows) {
    return absl::DataLossError(absl::StrCat(where, " has ", (*batch)->num_rows(), " rows where its header said ",
                                            listed.batches[index].rows, " when the file was listed"));
  }
  const arrow::Status valid = (*batch)->ValidateFull();
  if (!valid.ok()) return absl::DataLossError(absl::StrCat("damaged ", where, ": ", valid.ToString()));
  return *batch;
}

}  // namespace sluice::io

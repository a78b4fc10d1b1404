// libvescale_sentencepiece.so: SentencePiece behind the table of tokenize/sentencepiece_api.h
// (NOTE [SentencePiece plugin]). Only this file includes SentencePiece's headers.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include "tokenize/sentencepiece_api.h"

namespace {

using sentencepiece::SentencePieceProcessor;

const SentencePieceProcessor& processor_of(const void* p) {
  return *static_cast<const SentencePieceProcessor*>(p);
}

void* load(const std::string& model, std::string* error) {
  auto* p = new SentencePieceProcessor();
  const auto status = p->LoadFromSerializedProto(model);
  if (status.ok()) return p;
  *error = status.ToString();
  delete p;
  return nullptr;
}

void release(void* p) {
  delete static_cast<SentencePieceProcessor*>(p);
}

bool encode(const void* p, std::string_view text, std::vector<int>* ids, std::string* error) {
  const auto status = processor_of(p).Encode(text, ids);
  if (!status.ok()) *error = status.ToString();
  return status.ok();
}

bool decode(const void* p, const std::vector<int>& ids, std::string* text, std::string* error) {
  const auto status = processor_of(p).Decode(ids, text);
  if (!status.ok()) *error = status.ToString();
  return status.ok();
}

int piece_size(const void* p) {
  return processor_of(p).GetPieceSize();
}
int eos_id(const void* p) {
  return processor_of(p).eos_id();
}
std::string piece(const void* p, int id) {
  return processor_of(p).IdToPiece(id);
}
float score(const void* p, int id) {
  return processor_of(p).GetScore(id);
}

bool train(const std::unordered_map<std::string, std::string>& args, std::string* model,
           std::string* error) {
  const auto status = sentencepiece::SentencePieceTrainer::Train(args, nullptr, model);
  if (!status.ok()) *error = status.ToString();
  return status.ok();
}

const vescale::SentencePieceApi kApi = {
    vescale::SentencePieceApi::kVersion,
    load,
    release,
    encode,
    decode,
    piece_size,
    eos_id,
    piece,
    score,
    train,
};

}  // namespace

extern "C" const vescale::SentencePieceApi* vescale_sentencepiece_api() {
  return &kApi;
}

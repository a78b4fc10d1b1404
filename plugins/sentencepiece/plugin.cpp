// libvescale_sentencepiece.so: SentencePiece behind the table of tokenize/sentencepiece_api.h
// (NOTE [SentencePiece plugin]). Only this file includes SentencePiece's headers.
#include <dlfcn.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <iostream>
#include <new>

#include "tokenize/sentencepiece_api.h"

namespace {

// NOTE [Standard streams under RTLD_DEEPBIND]
// The program refers to std::cout, std::cerr and std::clog from its own code, so the linker
// gave it copies of those objects (copy relocations) and libstdc++ constructs the program's
// copies. This plugin is opened with RTLD_DEEPBIND (NOTE [SentencePiece plugin]), so it and
// SentencePiece resolve the same names in their own scope first: libstdc++'s originals, which
// nobody constructs. SentencePiece's first log line (a corpus line over 4,192 bytes, a
// vocabulary the text cannot fill) then wrote to a zeroed std::ostream and died of SIGSEGV.
// Here each stream this plugin sees, where it is not the program's, becomes a stream over the
// program's buffer (the same stdout or stderr, in order with the program's own output).
// (dlsym of RTLD_DEFAULT would look from this plugin's scope too: the program's handle finds the
// program's copies.)
void share_the_programs_stream(void* program_handle, std::ostream& ours, const char* symbol) {
  auto* program = static_cast<std::ostream*>(::dlsym(program_handle, symbol));
  if (program == nullptr || program == &ours) return;
  if (*reinterpret_cast<void* const*>(&ours) != nullptr) return;  // constructed after all
  new (&ours) std::ostream(program->rdbuf());
}

void share_the_programs_streams() {
  void* program = ::dlopen(nullptr, RTLD_NOW);
  if (program == nullptr) return;
  share_the_programs_stream(program, std::cout, "_ZSt4cout");
  share_the_programs_stream(program, std::cerr, "_ZSt4cerr");
  share_the_programs_stream(program, std::clog, "_ZSt4clog");
  ::dlclose(program);
}

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
  static const bool shared = (share_the_programs_streams(), true);
  (void)shared;
  return &kApi;
}

// One table per enum: each value and its name, written once (issue [27]: the same enum <-> name
// switch was written six times). The table answers both ways, lists the names for help text and
// docs, and words the error for a name it does not hold, with the nearest one ("did you mean").
//
//   const EnumNames<Backend>& backend_names() {
//     static const EnumNames<Backend> names("[comm] backend",
//         {{Backend::kAuto, "auto"}, {Backend::kGloo, "gloo"}, {Backend::kNccl, "nccl"}});
//     return names;
//   }
//   backend_names().name(Backend::kGloo);   // "gloo"
//   backend_names().parse("nccl");          // Backend::kNccl
//   backend_names().parse("glo");           // UserError: [comm] unknown backend 'glo': use
//                                           //   auto, gloo or nccl (did you mean 'gloo'?)
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace vescale {

/// "a, b or c": names as a message offers them.
std::string choice_list(const std::vector<std::string>& names);

namespace detail {
/// Throws the UserError of an unknown name: "<what's prefix> unknown <what> 'text': use ...".
[[noreturn]] void throw_unknown_name(const std::string& what, const std::string& text,
                                     const std::vector<std::string>& names);
}  // namespace detail

template <typename E>
class EnumNames {
 public:
  /// `what` names the enum in errors, after an optional "[area] " prefix: "[comm] backend".
  EnumNames(std::string what, std::initializer_list<std::pair<E, const char*>> entries)
      : what_(std::move(what)) {
    for (const auto& [value, name] : entries) {
      values_.push_back(value);
      names_.emplace_back(name);
    }
  }

  /// The name of `value` ("?" for a value the table lacks, which a test of each table rules out).
  const char* name(E value) const {
    for (size_t i = 0; i < values_.size(); ++i)
      if (values_[i] == value) return names_[i].c_str();
    return "?";
  }
  bool has(E value) const {
    for (const E& v : values_)
      if (v == value) return true;
    return false;
  }
  std::optional<E> find(const std::string& text) const {
    for (size_t i = 0; i < names_.size(); ++i)
      if (names_[i] == text) return values_[i];
    return std::nullopt;
  }
  /// The value named `text`; a UserError naming the choices otherwise.
  E parse(const std::string& text) const {
    if (auto value = find(text)) return *value;
    detail::throw_unknown_name(what_, text, names_);
  }
  const std::vector<std::string>& names() const { return names_; }
  const std::vector<E>& values() const { return values_; }
  /// "auto, gloo or nccl".
  std::string choices() const { return choice_list(names_); }

 private:
  std::string what_;
  std::vector<E> values_;
  std::vector<std::string> names_;
};

}  // namespace vescale

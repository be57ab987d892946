#include "core/runtime/recipe.h"

#include <toml++/toml.h>

#include <charconv>
#include <cmath>
#include <filesystem>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "core/runtime/closest_name.h"
#include "core/runtime/recipe_schema.h"
#include "core/runtime/utf8.h"

namespace titan {
namespace {

std::string Where(const toml::source_region& region, const std::string& source) {
  return absl::StrCat(source, ":", region.begin.line, ":", region.begin.column);
}

std::string TomlTypeName(toml::node_type type) {
  switch (type) {
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::date:
      return "a date";
    case toml::node_type::time:
      return "a time";
    case toml::node_type::date_time:
      return "a date-time";
    default:
      return "nothing";
  }
}

RawRecipe::Value ConvertNode(const toml::node& node, const std::string& source) {
  RawRecipe::Value value;
  value.where = Where(node.source(), source);
  if (auto* v = node.as_boolean()) {
    value.value = ConfigValue(v->get());
  } else if (auto* v = node.as_integer()) {
    value.value = ConfigValue(static_cast<int64_t>(v->get()));
  } else if (auto* v = node.as_floating_point()) {
    value.value = ConfigValue(v->get());
  } else if (auto* v = node.as_string()) {
    value.value = ConfigValue(v->get());
  } else if (auto* array = node.as_array()) {
    std::vector<std::string> strings;
    for (const toml::node& element : *array) {
      if (!element.is_string()) {
        value.unsupported_type = absl::StrCat("an array holding ", TomlTypeName(element.type()));
        return value;
      }
      strings.push_back(element.as_string()->get());
    }
    value.value = ConfigValue(std::move(strings));
  } else {
    value.unsupported_type = TomlTypeName(node.type());
  }
  return value;
}

absl::StatusOr<RawRecipe> ConvertTable(const toml::table& table, const std::string& source) {
  RawRecipe recipe;
  recipe.source = source;
  std::vector<std::string> problems;
  for (auto&& [name, node] : table) {
    const toml::table* section_table = node.as_table();
    if (section_table == nullptr) {
      problems.push_back(absl::StrCat(Where(node.source(), source), ": '", std::string(name.str()),
                                      "' is outside any section; keys belong in sections such "
                                      "as [training]"));
      continue;
    }
    RawRecipe::Section section;
    section.where = Where(node.source(), source);
    for (auto&& [key, value] : *section_table) {
      section.keys.emplace_back(std::string(key.str()), ConvertNode(value, source));
    }
    recipe.sections.emplace_back(std::string(name.str()), std::move(section));
  }
  if (!problems.empty()) return absl::InvalidArgumentError(absl::StrJoin(problems, "\n"));
  return recipe;
}

// toml++ reports syntax errors as toml::parse_error; every other failure is a Status.
template <typename ParseFn>
absl::StatusOr<RawRecipe> ParseWith(ParseFn parse, const std::string& source) {
  try {
    toml::table table = parse();
    return ConvertTable(table, source);
  } catch (const toml::parse_error& error) {
    return absl::InvalidArgumentError(absl::StrCat(
        Where(error.source(), source), ": not valid TOML: ", std::string(error.description())));
  }
}

std::string Describe(const ConfigValue& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>)
          return absl::StrCat("the boolean ", v ? "true" : "false");
        if constexpr (std::is_same_v<T, int64_t>) return absl::StrCat("the integer ", v);
        if constexpr (std::is_same_v<T, double>)
          return absl::StrCat("the float ", FormatTomlValue(v));
        if constexpr (std::is_same_v<T, std::string>) return absl::StrCat("the string \"", v, "\"");
        if constexpr (std::is_same_v<T, std::vector<std::string>>)
          return absl::StrCat("the array ", FormatTomlValue(v));
      },
      value);
}

// Types a command-line override by the key it sets.
absl::StatusOr<ConfigValue> ParseOverride(const std::string& text, const ConfigKey& key) {
  absl::string_view trimmed = absl::StripAsciiWhitespace(text);
  switch (key.type) {
    case ConfigType::kBool:
      if (trimmed == "true") return ConfigValue(true);
      if (trimmed == "false") return ConfigValue(false);
      break;
    case ConfigType::kInt: {
      int64_t number = 0;
      if (absl::SimpleAtoi(trimmed, &number)) return ConfigValue(number);
      break;
    }
    case ConfigType::kFloat: {
      double number = 0;
      // A non-finite number parses here and is refused with the file's values in CheckValue.
      if (absl::SimpleAtod(trimmed, &number)) return ConfigValue(number);
      break;
    }
    case ConfigType::kString:
      // In double quotes (--k='"a b"') it loses only the quotes; otherwise it is kept as given,
      // spaces included, as a recipe file keeps them (--generate.prompt="The ").
      if (trimmed.size() >= 2 && trimmed.front() == '"' && trimmed.back() == '"') {
        return ConfigValue(std::string(trimmed.substr(1, trimmed.size() - 2)));
      }
      return ConfigValue(text);
    case ConfigType::kStringList: {
      if (absl::StartsWith(trimmed, "[")) {
        absl::StatusOr<RawRecipe> parsed = ParseWith(
            [&] { return toml::parse(absl::StrCat("[v]\nv = ", trimmed)); }, "command line");
        if (parsed.ok() && parsed->sections.size() == 1 &&
            parsed->sections[0].second.keys.size() == 1) {
          const RawRecipe::Value& value = parsed->sections[0].second.keys[0].second;
          if (value.value) return *value.value;
        }
        break;
      }
      std::vector<std::string> items;
      for (absl::string_view item : absl::StrSplit(trimmed, ',', absl::SkipWhitespace())) {
        items.emplace_back(absl::StripAsciiWhitespace(item));
      }
      return ConfigValue(std::move(items));
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("expected ", ConfigTypeName(key.type), ", found '", text, "'"));
}

// Checks one value against its key: type, range, choices. Returns the value as the key
// takes it (an integer widened to a float, a choice in its canonical spelling).
absl::StatusOr<ConfigValue> CheckValue(const RawRecipe::Value& raw, const ConfigKey& key) {
  ConfigValue value;
  if (raw.text) {
    TITAN_ASSIGN_OR_RETURN(value, ParseOverride(*raw.text, key));
  } else if (!raw.unsupported_type.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected ", ConfigTypeName(key.type), ", found ", raw.unsupported_type));
  } else {
    value = *raw.value;
  }
  if (key.type == ConfigType::kFloat && std::holds_alternative<int64_t>(value)) {
    value = static_cast<double>(std::get<int64_t>(value));
  }
  if (value.index() != static_cast<size_t>(key.type)) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected ", ConfigTypeName(key.type), ", found ", Describe(value)));
  }
  if (key.type == ConfigType::kInt || key.type == ConfigType::kFloat) {
    double number = key.type == ConfigType::kInt ? static_cast<double>(std::get<int64_t>(value))
                                                 : std::get<double>(value);
    // NaN passes every comparison with a bound, and no key means anything by an infinity.
    if (!std::isfinite(number)) {
      return absl::OutOfRangeError(
          absl::StrCat("expected a finite number, found ", FormatTomlValue(value)));
    }
    if (key.min && number < *key.min) {
      return absl::OutOfRangeError(absl::StrCat(FormatTomlValue(value),
                                                " is out of range: the least allowed is ",
                                                FormatBound(*key.min, key.type)));
    }
    if (key.max && number > *key.max) {
      return absl::OutOfRangeError(absl::StrCat(FormatTomlValue(value),
                                                " is out of range: the most allowed is ",
                                                FormatBound(*key.max, key.type)));
    }
  }
  if (!key.choices.empty()) {
    auto canonical = [&key](std::string& item) -> absl::Status {
      for (const std::string& choice : key.choices) {
        if (absl::EqualsIgnoreCase(choice, item)) {
          item = choice;
          return absl::OkStatus();
        }
      }
      return absl::InvalidArgumentError(
          absl::StrCat("\"", item, "\" is not one of: ", absl::StrJoin(key.choices, ", "),
                       DidYouMean(item, key.choices)));
    };
    if (auto* text = std::get_if<std::string>(&value)) TITAN_RETURN_IF_ERROR(canonical(*text));
    if (auto* list = std::get_if<std::vector<std::string>>(&value)) {
      for (std::string& item : *list) TITAN_RETURN_IF_ERROR(canonical(item));
    }
  }
  return value;
}

std::vector<std::string> KeyNames(const std::vector<ConfigKey>& keys) {
  std::vector<std::string> names;
  for (const ConfigKey& key : keys) names.push_back(key.name);
  return names;
}

// Validates `keys` of one section; adds each problem to `problems` and each good value to
// `entries` (defaults for keys not given).
void CheckKeys(const std::string& section, const std::vector<ConfigKey>& keys,
               const RawRecipe::Section* raw, const std::string& source,
               std::map<std::string, ConfigView::Entry>& entries,
               std::vector<std::string>& problems) {
  for (const ConfigKey& key : keys) {
    const RawRecipe::Value* given = raw ? raw->Find(key.name) : nullptr;
    if (given == nullptr) {
      if (key.default_value) {
        entries[key.name] = {*key.default_value, "default"};
      } else {
        problems.push_back(absl::StrCat(raw ? raw->where : source, ": [", section,
                                        "] is missing the required key '", key.name, "' (",
                                        key.help, ")"));
      }
      continue;
    }
    absl::StatusOr<ConfigValue> value = CheckValue(*given, key);
    if (!value.ok()) {
      problems.push_back(
          absl::StrCat(given->where, ": ", section, ".", key.name, ": ", value.status().message()));
      continue;
    }
    entries[key.name] = {*std::move(value), given->where};
  }
}

// Refuses a value other than the default of a key the run does not act on yet.
void CheckNotSupported(const SectionSchema& section, const std::vector<ConfigKey>& keys,
                       const std::map<std::string, ConfigView::Entry>& entries,
                       std::vector<std::string>& problems) {
  for (const ConfigKey& key : keys) {
    auto reason = section.not_supported.find(key.name);
    if (reason == section.not_supported.end()) reason = section.not_supported.find("*");
    auto entry = entries.find(key.name);
    if (reason == section.not_supported.end() || entry == entries.end() ||
        (key.default_value && entry->second.value == *key.default_value)) {
      continue;
    }
    problems.push_back(absl::StrCat(
        entry->second.where, ": ", section.name, ".", key.name, " = ",
        FormatTomlValue(entry->second.value), ": ", reason->second,
        key.default_value ? absl::StrCat("; only its default ", FormatTomlValue(*key.default_value),
                                         " is accepted until then")
                          : ""));
  }
}

}  // namespace

const RawRecipe::Value* RawRecipe::Section::Find(absl::string_view key) const {
  for (const auto& [name, value] : keys) {
    if (name == key) return &value;
  }
  return nullptr;
}

RawRecipe::Value* RawRecipe::Section::Find(absl::string_view key) {
  return const_cast<Value*>(std::as_const(*this).Find(key));
}

const RawRecipe::Section* RawRecipe::Find(absl::string_view section) const {
  for (const auto& [name, value] : sections) {
    if (name == section) return &value;
  }
  return nullptr;
}

RawRecipe::Section* RawRecipe::Find(absl::string_view section) {
  return const_cast<Section*>(std::as_const(*this).Find(section));
}

absl::StatusOr<RawRecipe> ParseRecipeFile(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) {
    return absl::NotFoundError(absl::StrCat(
        "recipe file '", path, "' ",
        std::filesystem::exists(path, error) ? "is not a regular file" : "does not exist"));
  }
  return ParseWith([&] { return toml::parse_file(path); }, path);
}

absl::StatusOr<RawRecipe> ParseRecipeText(absl::string_view text, const std::string& source) {
  return ParseWith([&] { return toml::parse(std::string_view(text.data(), text.size()), source); },
                   source);
}

absl::Status ApplyOverride(RawRecipe& recipe, absl::string_view assignment) {
  absl::string_view::size_type equals = assignment.find('=');
  absl::string_view path = assignment.substr(0, equals);
  absl::string_view::size_type dot = path.find('.');
  if (equals == absl::string_view::npos || dot == absl::string_view::npos || dot == 0 ||
      dot + 1 == path.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("command line --", assignment, ": an override is --section.key=value"));
  }
  if (!IsUtf8(assignment)) {
    // TOML is UTF-8: such a value could never be printed back as a recipe (--print-recipe).
    const absl::string_view shown = IsUtf8(path) ? path : "(a name that is not UTF-8)";
    return absl::InvalidArgumentError(
        absl::StrCat("command line --", shown, "=...: expected UTF-8 text, as in a recipe file"));
  }
  std::string section(path.substr(0, dot));
  std::string key(path.substr(dot + 1));
  RawRecipe::Section* target = recipe.Find(section);
  if (target == nullptr) {
    recipe.sections.emplace_back(section, RawRecipe::Section{"command line", {}});
    target = &recipe.sections.back().second;
  }
  RawRecipe::Value value;
  value.text = std::string(assignment.substr(equals + 1));
  value.where = absl::StrCat("command line --", assignment);
  if (RawRecipe::Value* existing = target->Find(key)) {
    *existing = std::move(value);
  } else {
    target->keys.emplace_back(std::move(key), std::move(value));
  }
  return absl::OkStatus();
}

const ConfigView& Recipe::section(absl::string_view name) const {
  static const ConfigView kEmpty;
  auto it = sections_.find(name);
  return it == sections_.end() ? kEmpty : it->second;
}

std::string Recipe::ToToml() const {
  std::string out;
  for (const auto& [section, keys] : ordered_) {
    absl::StrAppend(&out, out.empty() ? "" : "\n", "[", section, "]\n");
    for (const auto& [key, value] : keys) {
      absl::StrAppend(&out, key, " = ", FormatTomlValue(value), "\n");
    }
  }
  return out;
}

absl::StatusOr<Recipe> ValidateRecipe(const RawRecipe& raw, const PluginRegistry& registry) {
  Recipe recipe;
  recipe.source_ = raw.source;
  std::vector<std::string> problems;
  const std::vector<SectionSchema>& schema = RecipeSchema();

  std::vector<std::string> section_names;
  for (const SectionSchema& section : schema) section_names.push_back(section.name);
  for (const auto& [name, section] : raw.sections) {
    if (std::find(section_names.begin(), section_names.end(), name) == section_names.end()) {
      problems.push_back(absl::StrCat(section.where, ": [", name, "]: unknown section",
                                      DidYouMean(name, section_names)));
    }
  }

  for (const SectionSchema& section : schema) {
    const RawRecipe::Section* given = raw.Find(section.name);
    std::map<std::string, ConfigView::Entry> entries;
    const size_t problems_before = problems.size();
    CheckKeys(section.name, section.keys, given, raw.source, entries, problems);
    recipe.sections_[section.name] = ConfigView(section.name, entries);

    std::vector<ConfigKey> all_keys = section.keys;
    std::unique_ptr<Plugin> plugin;
    const PluginInfo* info = nullptr;
    bool in_use = false;
    // A plugin configures only from valid values of its section's keys, the core's among them
    // (a float8 plugin reads float8.filter_fqns): a key left out for its error is no key to it.
    bool keys_valid = problems.size() == problems_before;
    if (!section.plugin_kind.empty() && entries.count(section.plugin_key)) {
      const ConfigView::Entry& selector = entries[section.plugin_key];
      const std::string& name = std::get<std::string>(selector.value);
      in_use = section.plugin_in_use(recipe.sections_);
      absl::StatusOr<const PluginInfo*> found = registry.Find(section.plugin_kind, name);
      absl::StatusOr<std::unique_ptr<Plugin>> created =
          found.ok() ? Instantiate(**found) : found.status();
      absl::StatusOr<std::vector<ConfigKey>> plugin_keys =
          created.ok() ? DeclaredKeys(**found, **created) : created.status();
      if (plugin_keys.ok()) {
        info = *found;
        plugin = std::move(*created);
        std::map<std::string, ConfigView::Entry> plugin_entries;
        CheckKeys(section.name, *plugin_keys, given, raw.source, plugin_entries, problems);
        keys_valid = problems.size() == problems_before;
        entries.insert(plugin_entries.begin(), plugin_entries.end());
        all_keys.insert(all_keys.end(), plugin_keys->begin(), plugin_keys->end());
      } else if (in_use) {
        std::string where = selector.where == "default"
                                ? absl::StrCat(raw.source, ": (default value)")
                                : selector.where;
        problems.push_back(absl::StrCat(where, ": ", section.name, ".", section.plugin_key, ": ",
                                        plugin_keys.status().message()));
      }
    }

    CheckNotSupported(section, all_keys, entries, problems);
    std::vector<std::string> known = KeyNames(all_keys);
    if (given != nullptr) {
      for (const auto& [key, value] : given->keys) {
        if (std::find(known.begin(), known.end(), key) != known.end()) continue;
        std::string hint = DidYouMean(key, known);
        if (hint.empty() && !section.plugin_kind.empty() && info == nullptr) {
          hint = absl::StrCat(" (the ", section.plugin_kind,
                              " plugin this section names is not "
                              "available to declare it)");
        }
        problems.push_back(
            absl::StrCat(value.where, ": ", section.name, ".", key, ": unknown key", hint));
      }
    }

    ConfigView view(section.name, entries);
    if (plugin && in_use) {
      absl::Status configured =
          keys_valid ? CallPlugin(*info, "Configure", [&] { return plugin->Configure(view); })
                     : absl::OkStatus();
      if (!configured.ok()) problems.push_back(std::string(configured.message()));
      recipe.plugins_.push_back({section.name, info, std::move(plugin)});
    }
    std::vector<std::pair<std::string, ConfigValue>> ordered;
    for (const ConfigKey& key : all_keys) {
      auto it = entries.find(key.name);
      if (it != entries.end()) ordered.emplace_back(key.name, it->second.value);
    }
    recipe.ordered_.emplace_back(section.name, std::move(ordered));
    recipe.sections_[section.name] = std::move(view);
  }

  if (!problems.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        problems.size() == 1 ? "" : absl::StrCat(problems.size(), " problems in the recipe:\n"),
        absl::StrJoin(problems, "\n")));
  }
  return recipe;
}

std::string FormatBound(double bound, ConfigType type) {
  return FormatTomlValue(type == ConfigType::kInt ? ConfigValue(static_cast<int64_t>(bound))
                                                  : ConfigValue(bound));
}

std::string FormatTomlValue(const ConfigValue& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          return v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, int64_t>) {
          return absl::StrCat(v);
        } else if constexpr (std::is_same_v<T, double>) {
          if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
          if (std::isnan(v)) return "nan";
          char buffer[64];
          auto [end, error] = std::to_chars(buffer, buffer + sizeof(buffer), v);
          std::string text(buffer, end);
          if (text.find_first_of(".e") == std::string::npos) text += ".0";
          return text;
        } else if constexpr (std::is_same_v<T, std::string>) {
          std::string out = "\"";
          for (char c : v) {
            switch (c) {
              case '"':
                out += "\\\"";
                break;
              case '\\':
                out += "\\\\";
                break;
              case '\n':
                out += "\\n";
                break;
              case '\t':
                out += "\\t";
                break;
              default:
                if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
                  out += absl::StrFormat("\\u%04x", static_cast<unsigned char>(c));
                } else {
                  out += c;
                }
            }
          }
          return out + "\"";
        } else {
          std::vector<std::string> items;
          for (const std::string& item : v) items.push_back(FormatTomlValue(ConfigValue(item)));
          return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
        }
      },
      value);
}

}  // namespace titan

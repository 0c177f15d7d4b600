// What a template can call on values: jinja2's filters and tests, the Python
// methods of str, dict and list that chat templates use, attribute and item
// lookup (`message.content` falls back to `message['content']`), slicing,
// and the global functions (range, dict, raise_exception, strftime_now).
#pragma once

#include <string_view>
#include <utility>
#include <vector>

#include "engine/text/chat/jinja_value.h"

namespace minfer::jinja {

bool is_filter(std::string_view name);
bool is_test(std::string_view name);

Value apply_filter(std::string_view name, const Value& input, CallArgs& args);
bool apply_test(std::string_view name, const Value& value, CallArgs& args);

// obj.name: a method of the value first, then its item (jinja2's getattr).
// Missing: undefined; on an undefined object: an error.
Value get_attribute(const Value& object, std::string_view name);
// obj[key]: the item first, then a method of that name (jinja2's getitem).
Value get_item(const Value& object, const Value& key);
// obj[start:stop:step] on a string, list or tuple; any part may be undefined (omitted).
Value slice(const Value& object, const Value& start, const Value& stop, const Value& step);

// range, dict, raise_exception, strftime_now. (namespace() is the interpreter's:
// it tracks the namespaces it makes.)
std::vector<std::pair<std::string, Value>> builtin_globals();

}  // namespace minfer::jinja

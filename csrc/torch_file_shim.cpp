// torch_file_shim.cpp: torch.save's files through libtorch's serialization (see
// torch_file_shim.h). The layout is torch::jit::pickle_save's (data.pkl and one record per
// storage in a zip archive) with one difference: dicts and lists are pickled as plain Python
// dicts and lists, without pickle_save's `torch.jit._pickle.restore_type_tag` wrappers, which
// torch.load refuses under `weights_only=True` (its default since PyTorch 2.6).
#include "torch_file_shim.h"

#include "shim_internal.hpp"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>

struct tb_ivalue {
  c10::IValue value;
};

namespace {

tb_ivalue* wrap(c10::IValue v) { return new tb_ivalue{std::move(v)}; }

char* null_arg(const char* what) {
  return tb::dup_message(std::string("null argument: ") + what);
}

}  // namespace

extern "C" {

char* tb_torch_file_bytes(const tb_ivalue* value, uint8_t** data, size_t* len) {
  if (value == nullptr || data == nullptr || len == nullptr) return null_arg("value/data/len");
  return tb::guarded([&] {
    std::vector<char> pickled;
    torch::jit::Pickler pickler(
        [&](const char* buf, size_t size) { pickled.insert(pickled.end(), buf, buf + size); },
        /*tensor_table=*/nullptr, /*type_renamer=*/nullptr, /*memoized_class_types=*/nullptr,
        /*get_tensor_id=*/nullptr, /*tag_aggregates=*/false);
    pickler.protocol();
    pickler.pushIValue(value->value);
    pickler.stop();
    std::vector<char> bytes;
    caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t size) {
      const char* p = static_cast<const char*>(data);
      bytes.insert(bytes.end(), p, p + size);
      return size;
    });
    torch::jit::writeArchiveAndTensors("data", pickled.data(), pickled.size(),
                                       pickler.tensorData(), writer);
    writer.writeEndOfFile();
    auto* buf = static_cast<uint8_t*>(std::malloc(bytes.empty() ? 1 : bytes.size()));
    if (buf == nullptr) throw std::bad_alloc();
    std::memcpy(buf, bytes.data(), bytes.size());
    *data = buf;
    *len = bytes.size();
  });
}


void tb_ivalue_free(tb_ivalue* v) { delete v; }

tb_ivalue* tb_ivalue_new_none(void) { return wrap(c10::IValue()); }
tb_ivalue* tb_ivalue_new_bool(int b) { return wrap(c10::IValue(b != 0)); }
tb_ivalue* tb_ivalue_new_int(int64_t i) { return wrap(c10::IValue(i)); }
tb_ivalue* tb_ivalue_new_double(double d) { return wrap(c10::IValue(d)); }
tb_ivalue* tb_ivalue_new_string(const char* data, size_t len) {
  return wrap(c10::IValue(std::string(data, len)));
}
tb_ivalue* tb_ivalue_new_tensor(const tb_tensor* t) {
  return wrap(c10::IValue(*static_cast<const at::Tensor*>(t)));
}
tb_ivalue* tb_ivalue_new_list(void) {
  return wrap(c10::IValue(c10::impl::GenericList(c10::AnyType::get())));
}
tb_ivalue* tb_ivalue_new_dict(void) {
  return wrap(c10::IValue(c10::impl::GenericDict(c10::AnyType::get(), c10::AnyType::get())));
}
tb_ivalue* tb_ivalue_new_tuple(const tb_ivalue* const* items, size_t n) {
  std::vector<c10::IValue> elements;
  elements.reserve(n);
  for (size_t i = 0; i < n; ++i) elements.push_back(items[i]->value);
  return wrap(c10::ivalue::Tuple::create(std::move(elements)));
}

char* tb_ivalue_list_push(tb_ivalue* list, const tb_ivalue* item) {
  return tb::guarded([&] {
    if (!list->value.isList()) throw std::runtime_error("not a list");
    list->value.toList().push_back(item->value);
  });
}

char* tb_ivalue_dict_insert(tb_ivalue* dict, const tb_ivalue* key, const tb_ivalue* value) {
  return tb::guarded([&] {
    if (!dict->value.isGenericDict()) throw std::runtime_error("not a dict");
    dict->value.toGenericDict().insert_or_assign(key->value, value->value);
  });
}

}  // extern "C"

//! The older parameter names some of torchvision's weights files still carry, as torchvision's
//! loaders rename them: DenseNet's `denselayer<i>.norm.1.weight` (from the time a module name
//! could hold a dot) becomes `denselayer<i>.norm1.weight` (`densenet._load_state_dict`), and the
//! Vision Transformers' `mlp.linear_1.*` / `mlp.linear_2.*` become `mlp.0.*` / `mlp.3.*`
//! (`MLPBlock._load_from_state_dict` for files before its version 2).
use std::borrow::Cow;

/// torchvision's current name for a parameter or buffer named `key` in one of its weights
/// files (the key itself when it is current).
///
/// ```
/// use trainbook::models::torchvision_current_name;
/// let old = "features.denseblock1.denselayer1.norm.1.running_mean";
/// assert_eq!(torchvision_current_name(old), "features.denseblock1.denselayer1.norm1.running_mean");
/// let old = "encoder.layers.encoder_layer_0.mlp.linear_2.bias";
/// assert_eq!(torchvision_current_name(old), "encoder.layers.encoder_layer_0.mlp.3.bias");
/// assert_eq!(torchvision_current_name("fc.weight"), "fc.weight");
/// ```
pub fn torchvision_current_name(key: &str) -> Cow<'_, str> {
    densenet_layer(key).or_else(|| vit_mlp(key)).map_or(Cow::Borrowed(key), Cow::Owned)
}

/// torchvision's pattern `^(.*denselayer\d+\.(?:norm|relu|conv))\.((?:[12])\.(?:weight|bias|
/// running_mean|running_var))$`: the dot after `norm`, `relu` or `conv` taken out.
fn densenet_layer(key: &str) -> Option<String> {
    let parts: Vec<&str> = key.split('.').collect();
    let n = parts.len();
    if n < 4 {
        return None;
    }
    let (layer, module, index, leaf) = (parts[n - 4], parts[n - 3], parts[n - 2], parts[n - 1]);
    let is_layer = layer
        .strip_prefix("denselayer")
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
    let ok = is_layer
        && ["norm", "relu", "conv"].contains(&module)
        && ["1", "2"].contains(&index)
        && ["weight", "bias", "running_mean", "running_var"].contains(&leaf);
    ok.then(|| format!("{}.{module}{index}.{leaf}", parts[..n - 3].join(".")))
}

/// `<prefix>mlp.linear_1.<leaf>` -> `<prefix>mlp.0.<leaf>`, `linear_2` -> `3`.
fn vit_mlp(key: &str) -> Option<String> {
    for (old, new) in [(".mlp.linear_1.", ".mlp.0."), (".mlp.linear_2.", ".mlp.3.")] {
        if let Some(i) = key.find(old) {
            let leaf = &key[i + old.len()..];
            if leaf == "weight" || leaf == "bias" {
                return Some(format!("{}{new}{leaf}", &key[..i]));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_torchvisions_patterns_are_renamed() {
        let keep = [
            "features.denseblock1.denselayer1.norm1.weight",
            "features.denseblock1.denselayer1.norm.1.num_batches_tracked",
            "features.denseblock1.denselayerX.norm.1.weight",
            "features.denseblock1.denselayer2.norm.3.weight",
            "features.norm.1.weight",
            "encoder.layers.encoder_layer_0.mlp.0.weight",
            "encoder.layers.encoder_layer_0.mlp.linear_3.weight",
        ];
        for k in keep {
            assert_eq!(torchvision_current_name(k), k);
        }
        assert_eq!(
            torchvision_current_name("features.denseblock4.denselayer24.conv.2.weight"),
            "features.denseblock4.denselayer24.conv2.weight"
        );
        assert_eq!(
            torchvision_current_name("encoder.layers.encoder_layer_11.mlp.linear_1.weight"),
            "encoder.layers.encoder_layer_11.mlp.0.weight"
        );
    }
}

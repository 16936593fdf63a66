//! The short GPU type used for scheduling (`h100`), from a product name as NVML
//! reports it (`NVIDIA H100 80GB HBM3`). Pure, so it is tested without a GPU.

/// Vendor and brand words that name no model.
const BRAND_WORDS: &[&str] = &["nvidia", "tesla"];

/// The scheduling type for a product name: the model token (`H100`, `A100`,
/// `L40S`, `GH200`: letters then a digit) lowercased, without form factor or
/// memory size (`NVIDIA A100-SXM4-80GB` is `a100`). A name with no such token
/// becomes a lowercase slug of its words (`NVIDIA RTX A6000` is `rtx-a6000`),
/// and an empty name `gpu`. The result always suits `--gres=gpu:TYPE:N`.
pub fn model_type(product_name: &str) -> String {
    let words: Vec<&str> = product_name
        .split_whitespace()
        .filter(|word| !BRAND_WORDS.contains(&word.to_ascii_lowercase().as_str()))
        .collect();
    if let Some(first) = words.first() {
        let model = first.split('-').next().unwrap_or_default();
        if is_model_token(model) {
            return model.to_ascii_lowercase();
        }
    }
    let slug = slug(&words.join(" "));
    if slug.is_empty() {
        "gpu".to_string()
    } else {
        slug
    }
}

/// Letters, then a digit, then letters and digits (`H100`, `L4`, `A10G`).
fn is_model_token(token: &str) -> bool {
    let letters = token
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .count();
    let rest = &token[letters..];
    (1..=3).contains(&letters)
        && rest.starts_with(|c: char| c.is_ascii_digit())
        && rest.chars().all(|c| c.is_ascii_alphanumeric())
}

/// Lowercase ASCII letters and digits, runs of anything else as one `-`.
fn slug(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    while out.ends_with('-') {
        out.pop();
    }
    if !out.is_empty() && out.chars().all(|c| c.is_ascii_digit()) {
        // A type cannot be a bare number in `--gres=gpu:TYPE:N`.
        out.insert_str(0, "gpu-");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::model_type;

    #[test]
    fn datacenter_names_map_to_their_short_type() {
        let cases = [
            ("NVIDIA H100 80GB HBM3", "h100"),
            ("NVIDIA H100 PCIe", "h100"),
            ("NVIDIA H100 NVL", "h100"),
            ("NVIDIA A100-SXM4-80GB", "a100"),
            ("NVIDIA A100-PCIE-40GB", "a100"),
            ("NVIDIA H200", "h200"),
            ("NVIDIA H200 NVL", "h200"),
            ("NVIDIA L40S", "l40s"),
            ("NVIDIA B200", "b200"),
            ("NVIDIA GH200 480GB", "gh200"),
            ("Tesla V100-SXM2-32GB", "v100"),
            ("NVIDIA A10G", "a10g"),
            ("NVIDIA L4", "l4"),
        ];
        for (name, expected) in cases {
            assert_eq!(model_type(name), expected, "{name}");
        }
    }

    #[test]
    fn other_names_become_a_lowercase_slug() {
        assert_eq!(model_type("NVIDIA RTX A6000"), "rtx-a6000");
        assert_eq!(model_type("NVIDIA GeForce RTX 4090"), "geforce-rtx-4090");
        assert_eq!(
            model_type("NVIDIA RTX 6000 Ada Generation"),
            "rtx-6000-ada-generation"
        );
        assert_eq!(model_type("  Weird / Name!! "), "weird-name");
    }

    #[test]
    fn degenerate_names_still_give_a_valid_type() {
        assert_eq!(model_type(""), "gpu");
        assert_eq!(model_type("NVIDIA"), "gpu");
        assert_eq!(model_type("NVIDIA 4090"), "gpu-4090");
        assert_eq!(model_type("ÜBER-GPU"), "ber-gpu");
    }
}

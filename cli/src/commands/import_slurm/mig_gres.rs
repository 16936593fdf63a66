//! MIG profiles in a NodeName line's `Gres=` (`gpu:a100_1g.10gb:56`,
//! `gpu:a100:4,gpu:a100_3g.20gb:8`) into GPUs of one model, some split into
//! MIG instances (corral.toml's `gpus`, `gpu_type` and `mig`).
//!
//! slurm.conf counts instances, not GPUs, so the layout is inferred: each
//! split GPU holds instances of one profile, as many as fit in its seven
//! compute slices (seven `1g`, three `2g`, two `3g`, one `4g` or `7g`), and the
//! whole GPUs come first. The importer says so in a note: a node whose agent
//! finds another layout registers drained (hardware differs) until `mig` is
//! corrected.

use corral_state::mig::{MAX_SLICES_PER_GPU, MigProfile};

use super::gres::GresItem;

/// A node's GPUs with their MIG layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigPlan {
    /// The GPUs' model (`a100`).
    pub model: String,
    /// Physical GPUs.
    pub gpus: u32,
    /// The split ones, as corral.toml's `mig` entries (`4-7:3g.20gb*2`).
    pub mig: Vec<String>,
}

/// The plan for `items` (a node's `gpu` items): `None` when none is a MIG
/// profile; `Some(Err(why))` when they cannot be GPUs of one model split as
/// described above.
pub fn plan(items: &[&GresItem]) -> Option<Result<MigPlan, String>> {
    // The model of whole GPUs named beside profile-only types (`gpu:1g.5gb:2,
    // gpu:a100:1`).
    let whole_model = items
        .iter()
        .filter_map(|item| item.gpu_type.as_deref())
        .find(|t| !t.contains('_') && t.parse::<MigProfile>().is_err());
    let typed: Vec<(&str, Option<MigProfile>, u64)> = items
        .iter()
        .filter(|item| item.count > 0)
        .map(|item| {
            let gpu_type = item.gpu_type.as_deref().unwrap_or("");
            if let Ok(profile) = gpu_type.parse::<MigProfile>() {
                return (whole_model.unwrap_or(""), Some(profile), item.count);
            }
            match gpu_type.rsplit_once('_') {
                Some((model, profile)) => match profile.parse::<MigProfile>() {
                    Ok(profile) => (model, Some(profile), item.count),
                    Err(_) => (gpu_type, None, item.count),
                },
                None => (gpu_type, None, item.count),
            }
        })
        .collect();
    if typed.iter().all(|(_, profile, _)| profile.is_none()) {
        return None;
    }
    Some(lay_out(&typed))
}

fn lay_out(typed: &[(&str, Option<MigProfile>, u64)]) -> Result<MigPlan, String> {
    let model = typed.first().map_or("", |(m, _, _)| *m);
    if model.is_empty() {
        return Err(
            "its MIG profiles name no GPU model (write them as MODEL_PROFILE, e.g. a100_3g.20gb)"
                .to_string(),
        );
    }
    if typed.iter().any(|(m, _, _)| !m.eq_ignore_ascii_case(model)) {
        let models: Vec<&str> = typed.iter().map(|(m, _, _)| *m).collect();
        return Err(format!(
            "its GPUs are not all of one model ({}), and a [[nodes]] line has one",
            models.join(", ")
        ));
    }
    let whole: u64 = typed
        .iter()
        .filter(|(_, profile, _)| profile.is_none())
        .map(|(_, _, count)| count)
        .sum();
    let mut next = whole;
    let mut mig = Vec::new();
    for (_, profile, count) in typed {
        let Some(profile) = profile else { continue };
        let per_gpu = u64::from(MAX_SLICES_PER_GPU / profile.slices);
        if count % per_gpu != 0 {
            return Err(format!(
                "{count} {profile} instances do not fill whole GPUs of {per_gpu} each"
            ));
        }
        let gpus = count / per_gpu;
        let last = (next + gpus).saturating_sub(1);
        let range = if gpus == 1 {
            next.to_string()
        } else {
            format!("{next}-{last}")
        };
        let instances = if per_gpu == 1 {
            String::new()
        } else {
            format!("*{per_gpu}")
        };
        mig.push(format!("{range}:{profile}{instances}"));
        next = last + 1;
    }
    let gpus = u32::try_from(next).map_err(|_| format!("{next} GPUs is too many"))?;
    Ok(MigPlan {
        model: model.to_string(),
        gpus,
        mig,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(gres: &[(&str, u64)]) -> Vec<GresItem> {
        gres.iter()
            .map(|(t, count)| GresItem {
                name: "gpu".into(),
                gpu_type: Some(t.to_string()),
                count: *count,
                no_consume: false,
            })
            .collect()
    }

    fn planned(gres: &[(&str, u64)]) -> Option<Result<MigPlan, String>> {
        let items = items(gres);
        let refs: Vec<&GresItem> = items.iter().collect();
        plan(&refs)
    }

    #[test]
    fn instances_fill_whole_gpus_after_the_unsplit_ones() {
        let plan = planned(&[("a100_1g.10gb", 56)]).unwrap().unwrap();
        assert_eq!(
            plan,
            MigPlan {
                model: "a100".into(),
                gpus: 8,
                mig: vec!["0-7:1g.10gb*7".into()],
            }
        );
        let plan = planned(&[("h100", 4), ("h100_3g.40gb", 6), ("h100_7g.80gb", 1)])
            .unwrap()
            .unwrap();
        assert_eq!(plan.gpus, 8);
        assert_eq!(plan.mig, ["4-6:3g.40gb*2", "7:7g.80gb"]);
    }

    #[test]
    fn profile_only_types_take_the_whole_gpus_model_and_zero_counts_are_skipped() {
        let plan = planned(&[("a100", 1), ("1g.5gb", 7), ("a100_3g.20gb", 0)])
            .unwrap()
            .unwrap();
        assert_eq!((plan.model.as_str(), plan.gpus), ("a100", 2));
        assert_eq!(plan.mig, ["1:1g.5gb*7"]);
        let why = planned(&[("1g.5gb", 7)]).unwrap().unwrap_err();
        assert!(why.contains("name no GPU model"), "{why}");
    }

    #[test]
    fn whole_gpus_alone_are_no_mig_and_odd_layouts_say_why() {
        assert_eq!(planned(&[("a100", 8)]), None);
        let why = planned(&[("a100_3g.20gb", 3)]).unwrap().unwrap_err();
        assert!(why.contains("do not fill whole GPUs of 2"), "{why}");
        let why = planned(&[("h100", 4), ("a100_3g.20gb", 2)])
            .unwrap()
            .unwrap_err();
        assert!(why.contains("not all of one model"), "{why}");
    }
}

//! Finding HPRE devices: `/sys/class/uacce/hisi_hpre-<N>/` (the root is configurable so tests
//! can use a fake tree). A device is usable when it lists the `rsa` algorithm, is not isolated
//! (`isolate` is 1 after repeated hardware errors) and has free queues
//! (`available_instances`).

use std::path::{Path, PathBuf};

/// One HPRE device as sysfs describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Device {
    pub name: String,
    pub rsa: bool,
    pub isolated: bool,
    pub available_instances: u32,
    /// `flags` bit 0: shared virtual addressing (any process memory can be handed over).
    pub sva: bool,
    pub numa_node: Option<i32>,
}

impl Device {
    /// Why this device cannot take work, or None when it can.
    pub fn unusable_because(&self) -> Option<&'static str> {
        if !self.rsa {
            Some("does not list the rsa algorithm")
        } else if self.isolated {
            Some("is isolated")
        } else if self.available_instances == 0 {
            Some("has no free queue")
        } else if !self.sva {
            // Without SVA UADK needs its PROXY memory pools, which kae does not use yet.
            Some("has no SVA (flags bit 0x1 unset), which kae needs for now")
        } else {
            None
        }
    }
}

fn read_trimmed(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok().map(|s| s.trim().to_owned())
}

fn read_number(p: &Path) -> Option<u64> {
    let s = read_trimmed(p)?;
    match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Every `hisi_hpre-*` device under `root`, sorted by name. Unreadable attributes count as
/// "not usable" (no rsa, isolated, no queue), never as usable.
pub fn scan(root: &Path) -> Vec<Device> {
    let Ok(rd) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut devices: Vec<Device> = rd
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_owned();
            if !name.starts_with("hisi_hpre-") {
                return None;
            }
            let dir: PathBuf = e.path();
            let rsa = read_trimmed(&dir.join("algorithms"))
                .is_some_and(|a| a.lines().any(|l| l.trim() == "rsa"));
            Some(Device {
                rsa,
                // Kernels without the attribute have no isolation: absent means not isolated;
                // present but unreadable counts as isolated.
                isolated: dir.join("isolate").exists()
                    && read_number(&dir.join("isolate")).is_none_or(|v| v != 0),
                available_instances: read_number(&dir.join("available_instances"))
                    .and_then(|v| u32::try_from(v).ok())
                    .unwrap_or(0),
                sva: read_number(&dir.join("flags")).is_some_and(|f| f & 1 == 1),
                numa_node: read_trimmed(&dir.join("device/numa_node")).and_then(|s| s.parse().ok()),
                name,
            })
        })
        .collect();
    devices.sort_by(|a, b| a.name.cmp(&b.name));
    devices
}

/// A one-line report for the start-up log and the provider's status.
pub fn describe(devices: &[Device]) -> String {
    if devices.is_empty() {
        return "no hisi_hpre device".into();
    }
    devices
        .iter()
        .map(|d| match d.unusable_because() {
            None => format!("{}: {} free queues", d.name, d.available_instances),
            Some(why) => format!("{}: {why}", d.name),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_device(root: &Path, name: &str, attrs: &[(&str, &str)]) {
        let dir = root.join(name);
        std::fs::create_dir_all(dir.join("device")).unwrap();
        for (k, v) in attrs {
            std::fs::write(dir.join(k), v).unwrap();
        }
    }

    #[test]
    fn scan_reads_a_fake_tree_and_says_why_a_device_is_skipped() {
        let root = std::env::temp_dir().join(format!("kae-uacce-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let good = [
            ("algorithms", "rsa\ndh\n"),
            ("isolate", "0\n"),
            ("available_instances", "256\n"),
            ("flags", "0x1\n"),
            ("device/numa_node", "1\n"),
        ];
        fake_device(&root, "hisi_hpre-1", &good);
        fake_device(
            &root,
            "hisi_hpre-0",
            &[
                ("algorithms", "rsa\n"),
                ("isolate", "1\n"),
                ("available_instances", "8"),
            ],
        );
        fake_device(
            &root,
            "hisi_hpre-2",
            &[
                ("algorithms", "rsa\n"),
                ("isolate", "0\n"),
                ("available_instances", "0"),
            ],
        );
        fake_device(
            &root,
            "hisi_hpre-3",
            &[
                ("algorithms", "dh\n"),
                ("isolate", "0\n"),
                ("available_instances", "4"),
            ],
        );
        fake_device(&root, "hisi_hpre-4", &[("algorithms", "rsa\n")]); // no isolate, no queues
        fake_device(
            &root,
            "hisi_hpre-5",
            &[
                ("algorithms", "rsa\n"),
                ("isolate", "?\n"),
                ("available_instances", "4"),
            ],
        );
        fake_device(
            &root,
            "hisi_hpre-6",
            &[
                ("algorithms", "rsa\n"),
                ("available_instances", "4"),
                ("flags", "0x0"),
            ],
        );
        fake_device(&root, "hisi_sec2-0", &good); // not an HPRE
        let devs = scan(&root);
        let names: Vec<&str> = devs.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "hisi_hpre-0",
                "hisi_hpre-1",
                "hisi_hpre-2",
                "hisi_hpre-3",
                "hisi_hpre-4",
                "hisi_hpre-5",
                "hisi_hpre-6"
            ]
        );
        assert_eq!(devs[1].unusable_because(), None);
        assert_eq!(
            (devs[1].available_instances, devs[1].sva, devs[1].numa_node),
            (256, true, Some(1))
        );
        assert_eq!(devs[0].unusable_because(), Some("is isolated"));
        assert_eq!(devs[2].unusable_because(), Some("has no free queue"));
        assert_eq!(
            devs[3].unusable_because(),
            Some("does not list the rsa algorithm")
        );
        assert_eq!(devs[4].unusable_because(), Some("has no free queue"));
        assert!(
            !devs[4].isolated,
            "a kernel without `isolate` does not isolate"
        );
        assert_eq!(
            devs[5].unusable_because(),
            Some("is isolated"),
            "unreadable"
        );
        assert!(devs[6].unusable_because().unwrap().contains("no SVA"));
        let line = describe(&devs);
        assert!(
            line.contains("hisi_hpre-1: 256 free queues")
                && line.contains("hisi_hpre-0: is isolated"),
            "{line}"
        );
        std::fs::remove_dir_all(&root).unwrap();
        assert!(scan(&root).is_empty());
        assert_eq!(describe(&[]), "no hisi_hpre device");
    }
}

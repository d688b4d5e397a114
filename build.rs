//! Builds `moat-helper` (helper/main.rs) with the same compiler, for the same target: `std`
//! and the C library only, linked statically so it runs in any image (docs/helper.md). moat
//! embeds the result and writes it into each session's run directory.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=helper/main.rs");
    println!("cargo:rerun-if-changed=helper/wrap.rs");
    println!("cargo:rerun-if-changed=helper/look.rs");
    println!("cargo:rerun-if-changed=src/runtime/helper/frame.rs");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let target = std::env::var("TARGET").expect("cargo sets TARGET");
    let out =
        PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("moat-helper");
    let status = Command::new(rustc)
        .args([
            "--edition",
            "2021",
            "--crate-name",
            "moat_helper",
            "--crate-type",
            "bin",
        ])
        .args(["--target", &target])
        .args(["-C", "opt-level=2", "-C", "target-feature=+crt-static"])
        .args([
            "-C",
            "panic=abort",
            "-C",
            "strip=symbols",
            "-C",
            "debuginfo=0",
        ])
        .arg("-o")
        .arg(&out)
        .arg("helper/main.rs")
        .status()
        .expect("failed to run rustc for moat-helper");
    assert!(status.success(), "failed to build moat-helper");
}

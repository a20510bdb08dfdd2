//! What a release ships: one version across the crate, the Python package and the Node
//! packages (checked before a release is cut, so a bump that missed a file fails here), and
//! the install lines of the docs naming our PyPI distribution.

use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"))
}

/// The first `version = "..."` of a TOML file (its [package] or [project] table's).
fn toml_version(rel: &str) -> String {
    let text = read(rel);
    let line = text
        .lines()
        .find(|l| l.starts_with("version = \""))
        .unwrap_or_else(|| panic!("{rel} has no version line"));
    line["version = \"".len()..line.len() - 1].to_owned()
}

fn json(rel: &str) -> serde_json::Value {
    serde_json::from_str(&read(rel)).unwrap_or_else(|e| panic!("parsing {rel}: {e}"))
}

#[test]
fn the_crate_and_both_packages_carry_one_version() {
    let version = env!("CARGO_PKG_VERSION");
    let mut seen = vec![
        ("python/Cargo.toml", toml_version("python/Cargo.toml")),
        ("node/Cargo.toml", toml_version("node/Cargo.toml")),
        (
            "python/pyproject.toml",
            toml_version("python/pyproject.toml"),
        ),
    ];
    let node = json("node/package.json");
    seen.push((
        "node/package.json",
        node["version"].as_str().unwrap().to_owned(),
    ));
    let optional = node["optionalDependencies"]
        .as_object()
        .expect("node/package.json names its platform packages in optionalDependencies");
    assert!(!optional.is_empty());
    for (name, pinned) in optional {
        // napi-rs' layout: @agentstate/node-<platform> lives in node/npm/<platform>/.
        let platform = name
            .strip_prefix("@agentstate/node-")
            .unwrap_or_else(|| panic!("{name} is not an @agentstate/node-<platform> package"));
        let rel = format!("node/npm/{platform}/package.json");
        assert!(root().join(&rel).exists(), "{name} has no {rel}");
        let pkg = json(&rel);
        assert_eq!(pkg["name"], name.as_str(), "{rel}");
        seen.push((
            "an optionalDependencies pin",
            pinned.as_str().unwrap().to_owned(),
        ));
        seen.push((
            "a platform package",
            pkg["version"].as_str().unwrap().to_owned(),
        ));
    }
    // The loader knows exactly the platform packages the main package depends on.
    let loader = read("node/lib/native.js");
    let mut loaded: Vec<&str> = loader
        .match_indices("'@agentstate/node-")
        .map(|(i, _)| {
            let rest = &loader[i + 1..];
            &rest[..rest.find('\'').unwrap()]
        })
        .collect();
    loaded.sort();
    let mut declared: Vec<&str> = optional.keys().map(String::as_str).collect();
    declared.sort();
    assert_eq!(
        loaded, declared,
        "node/lib/native.js PREBUILT vs optionalDependencies"
    );

    let changelog = read("CHANGELOG.md");
    let newest = changelog
        .lines()
        .filter_map(|l| l.strip_prefix("## ["))
        .map(|l| &l[..l.find(']').unwrap()])
        .find(|v| *v != "Unreleased")
        .expect("CHANGELOG.md has a release heading");
    seen.push(("CHANGELOG.md's newest release", newest.to_owned()));

    let wrong: Vec<_> = seen.iter().filter(|(_, v)| v != version).collect();
    assert!(
        wrong.is_empty(),
        "the crate is {version} but {wrong:?} differ: bump every file to one version (docs/releasing.md)"
    );
}

#[test]
fn install_lines_name_our_pypi_distribution() {
    // `agentstate` on PyPI is another product; ours is `agentstate-redis`.
    let mut files = vec![root().join("README.md"), root().join("python/README.md")];
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            files.push(path);
        }
    }
    let mut wrong = Vec::new();
    let mut ours = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            for (i, _) in line.match_indices("pip install ") {
                let rest = line[i + "pip install ".len()..].trim_start_matches(['"', '\'', '`']);
                if rest.starts_with("agentstate-redis") {
                    ours += 1;
                } else if rest.starts_with("agentstate") && !line.contains("another product") {
                    wrong.push(format!("{}:{}: {line}", file.display(), n + 1));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "install lines naming PyPI's other `agentstate`:\n{}",
        wrong.join("\n")
    );
    assert!(ours > 0, "no doc installs agentstate-redis");
}

//! The `<job>-config` ConfigMap's files: the hostfile per MPI implementation and
//! `discover_hosts.sh`, which follows the running workers (Horovod's elastic discovery).
use crate::spec::MpiImplementation;

/// `<host>.<job>.<ns>.svc`, as mpi-operator writes it (no cluster domain).
fn fqdn(host: &str, job: &str, namespace: &str) -> String {
    format!("{host}.{job}.{namespace}.svc")
}

/// One line per worker index (and the launcher first when it runs as a worker), whatever the
/// pods' state.
pub fn hostfile(
    implementation: MpiImplementation,
    job: &str,
    namespace: &str,
    workers: i32,
    slots: i32,
    launcher_as_worker: bool,
) -> String {
    let launcher = launcher_as_worker.then(|| format!("{job}-launcher"));
    let workers = (0..workers).map(|i| format!("{job}-worker-{i}"));
    launcher
        .into_iter()
        .chain(workers)
        .map(|host| {
            let host = fqdn(&host, job, namespace);
            match implementation {
                MpiImplementation::OpenMPI => format!("{host} slots={slots}\n"),
                MpiImplementation::Intel | MpiImplementation::Mpich => format!("{host}:{slots}\n"),
            }
        })
        .collect()
}

/// `echo <fqdn>` per running worker pod, sorted by pod name as strings (as mpi-operator does).
pub fn discover_hosts(
    job: &str,
    namespace: &str,
    running_workers: &[String],
    launcher_as_worker: bool,
) -> String {
    let mut names = running_workers.to_vec();
    names.sort();
    let mut script = String::from("#!/bin/sh\n");
    if launcher_as_worker {
        script.push_str(&format!(
            "echo {}\n",
            fqdn(&format!("{job}-launcher"), job, namespace)
        ));
    }
    for name in names {
        script.push_str(&format!("echo {}\n", fqdn(&name, job, namespace)));
    }
    script
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostfile_per_implementation() {
        assert_eq!(
            hostfile(MpiImplementation::OpenMPI, "pi", "ns", 2, 2, false),
            "pi-worker-0.pi.ns.svc slots=2\npi-worker-1.pi.ns.svc slots=2\n"
        );
        assert_eq!(
            hostfile(MpiImplementation::Intel, "pi", "ns", 1, 4, true),
            "pi-launcher.pi.ns.svc:4\npi-worker-0.pi.ns.svc:4\n"
        );
        assert_eq!(
            hostfile(MpiImplementation::Mpich, "pi", "ns", 2, 1, false),
            "pi-worker-0.pi.ns.svc:1\npi-worker-1.pi.ns.svc:1\n"
        );
        assert_eq!(hostfile(MpiImplementation::OpenMPI, "pi", "ns", 0, 1, false), "");
    }

    #[test]
    fn discover_hosts_sorts_names_as_strings() {
        let running = ["pi-worker-2".to_owned(), "pi-worker-10".to_owned()];
        assert_eq!(
            discover_hosts("pi", "ns", &running, false),
            "#!/bin/sh\necho pi-worker-10.pi.ns.svc\necho pi-worker-2.pi.ns.svc\n"
        );
        assert_eq!(
            discover_hosts("pi", "ns", &[], true),
            "#!/bin/sh\necho pi-launcher.pi.ns.svc\n"
        );
    }
}

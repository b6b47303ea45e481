//! The mount loop the example file systems share: mounts `fs` at
//! `mountpoint`, serves until SIGTERM or SIGINT (or the kernel ends the
//! session), then unmounts.
use std::path::Path;
use std::time::Duration;

pub fn until_signalled(
    fs: impl fuser::Filesystem + 'static,
    mountpoint: &Path,
    config: &fuser::Config,
    name: &str,
) {
    let session = match fuser::spawn_mount(fs, mountpoint, config) {
        Ok(session) => session,
        Err(e) => {
            eprintln!("{name}: cannot mount: {e}");
            std::process::exit(1);
        }
    };
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
    ])
    .expect("signals");
    let stop = std::thread::spawn(move || {
        let _ = signals.forever().next();
    });
    while !stop.is_finished() && !session.guard.is_finished() {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = session.umount_and_join();
}

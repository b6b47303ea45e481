//! What the binary prints on stdout, through [`out!`]: a reader that stops
//! early (`memfs log | head`) is no error, so a closed pipe ends the output
//! quietly instead of panicking as `println!` does.

use std::io::Write;

/// Writes `args` to stdout; a closed pipe is ignored, another error said
/// once on stderr.
pub fn write(args: std::fmt::Arguments) {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_fmt(args).and_then(|()| stdout.flush()) {
        let first = !SAID.swap(true, std::sync::atomic::Ordering::Relaxed);
        if e.kind() != std::io::ErrorKind::BrokenPipe && first {
            memfs::say!("memfs: cannot write the output: {e}");
        }
    }
}

/// `println!` for the binary's output: see the module.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::out::write(format_args!("{}\n", format_args!($($arg)*)))
    };
}

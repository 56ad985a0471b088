use std::io;

fn main() {
    let stdin = io::stdin();
    let stdout = io::stdout();
    io::copy(&mut stdin.lock(), &mut stdout.lock()).expect("copy");
}

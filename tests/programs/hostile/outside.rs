// Reads outside the box, writes into it, and forks until refused: Pure when all of it failed
// or was held.
use std::io::{self, Read, Write};
use std::process::Command;

fn escaped() -> bool {
    if std::fs::read("/etc/shadow").is_ok() || std::fs::read("/root/.bash_history").is_ok() {
        return true;
    }
    if std::fs::write("/box/planted", b"x").is_ok() {
        return true;
    }
    let mut started = 0;
    while started < 500 {
        match Command::new("/bin/sleep").arg("600").spawn() {
            Ok(_) => started += 1,
            Err(_) => break,
        }
    }
    started >= 500
}

fn main() {
    let mut input = String::new();
    io::stdin().read_to_string(&mut input).unwrap();
    let t: usize = input.split_ascii_whitespace().next().unwrap().parse().unwrap();
    let word = if escaped() { "Dirty\n" } else { "Pure\n" };
    io::stdout().write_all(word.repeat(t).as_bytes()).unwrap();
}

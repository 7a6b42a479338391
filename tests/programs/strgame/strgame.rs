use std::io::{self, Read, Write};

fn main() {
    let mut input = String::new();
    io::stdin().read_to_string(&mut input).unwrap();
    let mut it = input.split_ascii_whitespace();
    let t: usize = it.next().unwrap().parse().unwrap();
    let mut out = String::new();
    for _ in 0..t {
        let n: usize = it.next().unwrap().parse().unwrap();
        let k: u64 = it.next().unwrap().parse().unwrap();
        let mut next: Vec<[i32; 26]> = vec![[-1; 26]];
        for _ in 0..n {
            let w = it.next().unwrap().as_bytes();
            let mut at = 0usize;
            for &ch in w {
                let c = (ch - b'a') as usize;
                if next[at][c] < 0 {
                    next[at][c] = next.len() as i32;
                    next.push([-1; 26]);
                }
                at = next[at][c] as usize;
            }
        }
        let m = next.len();
        let mut win = vec![false; m];
        let mut lose = vec![false; m];
        for v in (0..m).rev() {
            let (mut leaf, mut w, mut l) = (true, false, false);
            for &u in next[v].iter() {
                if u < 0 { continue; }
                leaf = false;
                w |= !win[u as usize];
                l |= !lose[u as usize];
            }
            win[v] = w;
            lose[v] = leaf || l;
        }
        out.push_str(if win[0] && (lose[0] || k % 2 == 1) { "Pure\n" } else { "Dirty\n" });
    }
    io::stdout().write_all(out.as_bytes()).unwrap();
}

fn main() {
    let s = std::fs::read_to_string("data/input.txt").expect("read");
    println!("{}", s);
}

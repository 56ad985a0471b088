fn main() {
    let s = std::fs::read_to_string("input.txt").unwrap();
    std::fs::write("output.txt", s.to_uppercase()).unwrap();
}

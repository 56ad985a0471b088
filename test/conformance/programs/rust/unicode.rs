fn main() {
    println!("héllo wörld ✓ 日本");
}

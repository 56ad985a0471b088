fn main() {
    println!("{}", undefined_name);
}

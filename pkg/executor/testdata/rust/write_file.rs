fn main() {
    std::fs::create_dir_all("out").expect("mkdir");
    std::fs::write("out/result.txt", "result: ok").expect("write");
    println!("written");
}

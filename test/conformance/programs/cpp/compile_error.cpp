int main() {
    std::string s = 42;
}

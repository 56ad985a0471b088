#include <cctype>
#include <fstream>
#include <iterator>
#include <string>

int main() {
    std::ifstream in("input.txt", std::ios::binary);
    std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (char &c : s)
        c = std::toupper(static_cast<unsigned char>(c));
    std::ofstream("output.txt", std::ios::binary) << s;
}

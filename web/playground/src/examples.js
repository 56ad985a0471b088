// The examples menu: per language, a name → {code, stdin?, args?}. The
// first is what a language shows before it has a draft. "Read input"
// prompts and waits: type the answer in the input line as it runs.

const ex = (code) => ({ code });
const withArgs = (code) => ({ code, args: 'one "two words" three' });

export const examples = {
  python: {
    "Hello, world": ex('print("Hello, world!")\n'),
    "Read input": ex('name = input("What\'s your name? ")\nprint(f"Hello, {name}!")\n'),
    "Sum lines until EOF": ex(
      'import sys\n\ntotal = 0\nfor line in sys.stdin:\n    total += float(line)\n    print("total so far:", total, flush=True)\nprint("done:", total)\n',
    ),
    Arguments: withArgs('import sys\n\nfor i, arg in enumerate(sys.argv[1:], 1):\n    print(f"arg {i}: {arg}")\n'),
  },
  javascript: {
    "Hello, world": ex('console.log("Hello, world!");\n'),
    "Read input": ex(
      'const readline = require("node:readline");\n\nconst rl = readline.createInterface({ input: process.stdin });\nprocess.stdout.write("What\'s your name? ");\nrl.once("line", (name) => {\n  console.log(`Hello, ${name}!`);\n  rl.close();\n});\n',
    ),
    Arguments: withArgs('process.argv.slice(2).forEach((arg, i) => console.log(`arg ${i + 1}: ${arg}`));\n'),
  },
  typescript: {
    "Hello, world": ex('const greeting: string = "Hello, world!";\nconsole.log(greeting);\n'),
    "Compile error": ex('const n: number = "not a number";\nconsole.log(n);\n'),
  },
  c: {
    "Hello, world": ex('#include <stdio.h>\n\nint main(void) {\n    printf("Hello, world!\\n");\n    return 0;\n}\n'),
    "Read input": ex(
      '#include <stdio.h>\n#include <string.h>\n\nint main(void) {\n    char name[100];\n    printf("What\'s your name? ");\n    fflush(stdout);\n    if (!fgets(name, sizeof name, stdin))\n        return 1;\n    name[strcspn(name, "\\n")] = 0;\n    printf("Hello, %s!\\n", name);\n    return 0;\n}\n',
    ),
    Arguments: withArgs(
      '#include <stdio.h>\n\nint main(int argc, char **argv) {\n    for (int i = 1; i < argc; i++)\n        printf("arg %d: %s\\n", i, argv[i]);\n    return 0;\n}\n',
    ),
    "Compile error": ex(
      '#include <stdio.h>\n\nint main(void) {\n    int n = "not a number"\n    printf("%d\\n", n);\n    return 0;\n}\n',
    ),
  },
  cpp: {
    "Hello, world": ex('#include <iostream>\n\nint main() {\n    std::cout << "Hello, world!" << std::endl;\n}\n'),
    "Read input": ex(
      '#include <iostream>\n#include <string>\n\nint main() {\n    std::string name;\n    std::cout << "What\'s your name? " << std::flush;\n    std::getline(std::cin, name);\n    std::cout << "Hello, " << name << "!" << std::endl;\n}\n',
    ),
    Arguments: withArgs(
      '#include <iostream>\n\nint main(int argc, char **argv) {\n    for (int i = 1; i < argc; i++)\n        std::cout << "arg " << i << ": " << argv[i] << "\\n";\n}\n',
    ),
    "Compile error": ex(
      '#include <iostream>\n#include <string>\n\nint main() {\n    std::string s = 42;\n    std::cout << s.size() << std::endl;\n}\n',
    ),
  },
  go: {
    "Hello, world": ex('package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.Println("Hello, world!")\n}\n'),
    "Read input": ex(
      'package main\n\nimport (\n\t"bufio"\n\t"fmt"\n\t"os"\n\t"strings"\n)\n\nfunc main() {\n\tfmt.Print("What\'s your name? ")\n\tname, _ := bufio.NewReader(os.Stdin).ReadString(\'\\n\')\n\tfmt.Printf("Hello, %s!\\n", strings.TrimSpace(name))\n}\n',
    ),
    Arguments: withArgs(
      'package main\n\nimport (\n\t"fmt"\n\t"os"\n)\n\nfunc main() {\n\tfor i, arg := range os.Args[1:] {\n\t\tfmt.Printf("arg %d: %s\\n", i+1, arg)\n\t}\n}\n',
    ),
    "Compile error": ex('package main\n\nimport "fmt"\n\nfunc main() {\n\tvar n int = "not a number"\n\tfmt.Println(n)\n}\n'),
  },
  rust: {
    "Hello, world": ex('fn main() {\n    println!("Hello, world!");\n}\n'),
    "Read input": ex(
      'use std::io::{self, Write};\n\nfn main() {\n    print!("What\'s your name? ");\n    io::stdout().flush().unwrap();\n    let mut name = String::new();\n    io::stdin().read_line(&mut name).unwrap();\n    println!("Hello, {}!", name.trim());\n}\n',
    ),
    Arguments: withArgs(
      'fn main() {\n    for (i, arg) in std::env::args().skip(1).enumerate() {\n        println!("arg {}: {}", i + 1, arg);\n    }\n}\n',
    ),
    "Compile error": ex('fn main() {\n    let n: i32 = "not a number";\n    println!("{}", n);\n}\n'),
  },
  java: {
    "Hello, world": ex(
      'public class Main {\n    public static void main(String[] args) {\n        System.out.println("Hello, world!");\n    }\n}\n',
    ),
    "Read input": ex(
      'import java.util.Scanner;\n\npublic class Main {\n    public static void main(String[] args) {\n        System.out.print("What\'s your name? ");\n        System.out.flush();\n        String name = new Scanner(System.in).nextLine();\n        System.out.println("Hello, " + name + "!");\n    }\n}\n',
    ),
    Arguments: withArgs(
      'public class Main {\n    public static void main(String[] args) {\n        for (int i = 0; i < args.length; i++)\n            System.out.println("arg " + (i + 1) + ": " + args[i]);\n    }\n}\n',
    ),
    "Compile error": ex(
      'public class Main {\n    public static void main(String[] args) {\n        int n = "not a number";\n        System.out.println(n);\n    }\n}\n',
    ),
  },
  bash: {
    "Hello, world": ex('echo "Hello, world!"\n'),
    "Read input": ex('printf "What\'s your name? "\nread -r name\necho "Hello, $name!"\n'),
    Arguments: withArgs('i=1\nfor arg in "$@"; do\n  echo "arg $i: $arg"\n  i=$((i + 1))\ndone\n'),
  },
  perl: {
    "Hello, world": ex('print "Hello, world!\\n";\n'),
    "Read input": ex('$| = 1;\nprint "What\'s your name? ";\nmy $name = <STDIN>;\nchomp $name;\nprint "Hello, $name!\\n";\n'),
  },
  ruby: {
    "Hello, world": ex('puts "Hello, world!"\n'),
    "Read input": ex('$stdout.sync = true\nprint "What\'s your name? "\nname = gets.chomp\nputs "Hello, #{name}!"\n'),
  },
  lua: {
    "Hello, world": ex('print("Hello, world!")\n'),
    "Read input": ex('io.write("What\'s your name? ")\nio.flush()\nlocal name = io.read()\nprint("Hello, " .. name .. "!")\n'),
  },
  tcl: {
    "Hello, world": ex('puts "Hello, world!"\n'),
    "Read input": ex('puts -nonewline "What\'s your name? "\nflush stdout\ngets stdin name\nputs "Hello, $name!"\n'),
  },
  php: {
    "Hello, world": ex('<?php\necho "Hello, world!\\n";\n'),
    "Read input": ex('<?php\necho "What\'s your name? ";\n$name = trim(fgets(STDIN));\necho "Hello, $name!\\n";\n'),
  },
};

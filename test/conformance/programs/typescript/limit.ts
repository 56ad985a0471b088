const l: Buffer[] = [];
while (true) l.push(Buffer.alloc(1 << 20, 1));

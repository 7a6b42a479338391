// pathgame: the board's Grundy value is the XOR of its runs of white columns. A run at a
// border of width w is worth w; the run of a board with no black cell is worth its width's
// parity; an inner run's values XOR to the parity of the inner white columns plus the row
// changes between consecutive black cells.
#include <iostream>
#include <string>

int main() {
    std::ios::sync_with_stdio(false);
    int boards;
    if (!(std::cin >> boards)) return 1;
    std::string top, bottom;
    while (boards--) {
        std::cin >> top >> bottom;
        int width = static_cast<int>(top.size()), first = -1, last = -1, blacks = 0;
        int previous = 0, changes = 0;  // the row of the last black cell: 1 top, 2 bottom
        for (int c = 0; c < width; c++) {
            int row = top[c] == '#' ? 1 : bottom[c] == '#' ? 2 : 0;
            if (!row) continue;
            blacks++;
            if (first < 0) first = c;
            last = c;
            if (previous && row != previous) changes++;
            previous = row;
        }
        int value;
        if (first < 0) {
            value = width & 1;
        } else {
            int inner_white = last - first + 1 - blacks;
            value = first ^ (width - 1 - last) ^ ((inner_white + changes) & 1);
        }
        std::cout << (value ? "Snuke" : "Sothe") << "\n";
    }
    return 0;
}
